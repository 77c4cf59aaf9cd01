# \file report.cmake
# \brief test_report (label cpu): compare.py flags a planted regression and passes an unchanged run; the HTML
#        report renders in headless Chromium (screenshot saved as reports/report_screenshot.png in the build).
if(TARGET qtc_report)
  qtc_add_test(test_report SOURCES ${CMAKE_CURRENT_LIST_DIR}/report_test.cpp ${CMAKE_CURRENT_LIST_DIR}/report_hostile_test.cpp LIBS qtc_report LABELS cpu TIMEOUT 300
               ENV QTC_REPORT_SCREENSHOT=${CMAKE_CURRENT_BINARY_DIR}/report_screenshot.png)
endif()
