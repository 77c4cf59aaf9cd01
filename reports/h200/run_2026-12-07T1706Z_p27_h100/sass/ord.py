import sys,re
# ord.py file.sass "addr=T,..."  -> "ordinal=T,..." ; or ord.py file.sass --from "ord=T,..." -> addr form
f=sys.argv[1]
br=[]
for line in open(f):
    m=re.match(r'^([0-9a-f]{4,5}) (@!?U?P\w+ )BRA',line.strip())
    if m: br.append(m.group(1))
if sys.argv[2]=='--from':
    out=[]
    for kv in sys.argv[3].split(','):
        o,v=kv.split('='); out.append(f'{br[int(o)]}={v}')
    print(','.join(out))
else:
    out=[]
    for kv in sys.argv[2].split(','):
        a,v=kv.split('='); out.append(f'{br.index(a)}={v}')
    print(','.join(out))
