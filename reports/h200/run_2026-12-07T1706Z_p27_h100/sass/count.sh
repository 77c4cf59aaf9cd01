#!/bin/bash
# count.sh name fn_index [ordinal decisions file] : dynamic instructions per tile of the common 1x16 path
./extract.sh $1.sass $2 $1_f$2.s
be=$(grep -B1 -E "^[0-9a-f]+ EXIT" $1_f$2.s | head -1)
ba=$(echo "$be" | awk '{print $1}'); tgt=$(echo "$be" | grep -o "0x[0-9a-f]*" | tail -1 | sed 's/0x//')
D=$(python3 ord.py $1_f$2.s --from "$(cat ${3:-dec_ord.txt})")
python3 trace.py $1_f$2.s $tgt $ba "$D"
