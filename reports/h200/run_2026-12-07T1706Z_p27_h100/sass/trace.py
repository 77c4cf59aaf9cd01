import sys, re, collections
# usage: trace.py file.sass start_hex stop_hex decisions   (decisions: addr=T|N, comma separated)
f, start, stop = sys.argv[1], int(sys.argv[2],16), int(sys.argv[3],16)
dec = {}
if len(sys.argv) > 4 and sys.argv[4]:
    for kv in sys.argv[4].split(','):
        a, v = kv.split('='); dec[int(a,16)] = v
ins = {}
order = []
for line in open(f):
    m = re.match(r'^([0-9a-f]{4,5}) (.*)$', line.strip())
    if not m: continue
    a = int(m.group(1),16); ins[a] = m.group(2); order.append(a)
nxt = {order[i]: order[i+1] for i in range(len(order)-1)}
pc = start; cnt = collections.Counter(); n = 0; path=[]; visited=[]
while True:
    t = ins[pc]; n += 1; visited.append(pc)
    op = t.split()[0]
    if op.startswith('@'): op = t.split()[1]
    cnt[op.split('.')[0]] += 1
    if pc == stop: break
    m = re.match(r'^(@!?U?P\w+ )?BRA (?:!?U?P\w+, )?0x([0-9a-f]+)', t)
    if m:
        tgt = int(m.group(2),16)
        if m.group(1) is None: pc = tgt; continue
        d = dec.get(pc)
        if d is None:
            print(f'UNDECIDED branch at {pc:x}: {t}'); break
        pc = tgt if d == 'T' else nxt[pc]; path.append(f'{pc:x}'); continue
    if op.startswith('EXIT'): print('EXIT'); break
    pc = nxt[pc]
print('instructions', n)
print(' '.join(f'{k}:{v}' for k,v in cnt.most_common()))
if len(sys.argv) > 5:
    cuts = [int(c,16) for c in sys.argv[5].split(',')]
    seg = collections.Counter()
    for a in visited:
        k = sum(1 for c in cuts if a >= c)
        seg[k] += 1
    print('segments', [ (f'{cuts[k-1]:x}' if k else 'start', seg[k]) for k in sorted(seg)])
