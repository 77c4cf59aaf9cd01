# \file tests.cmake
# \brief placeholder
