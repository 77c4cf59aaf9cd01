#!/bin/bash
# extract.sh file.sass N out : the N-th function's instructions, "addr text"
awk -v n=$2 '/Function :/{k++} k==n' $1 | grep -E "^\s+/\*[0-9a-f]{4,5}\*/" | sed -E 's@^\s*/\*([0-9a-f]+)\*/\s*@\1 @; s@\s*/\* 0x[0-9a-f]+ \*/@@; s/ ;\s*$//' > $3
