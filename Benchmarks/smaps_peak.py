#!/usr/bin/env python3
"""The resident set of a client by kind of mapping, at its largest (issue 27 item 4).

    python3 Benchmarks/smaps_peak.py CLIENT [ARGS...]

Starts the client, samples /proc/PID/smaps every 50 ms until it exits, keeps the
sample with the largest total Rss and prints it grouped: the executable, the
Swift runtime libraries (/opt/swift), libcurl and its own dependencies, OpenSSL,
libc/libstdc++/libm/the loader, anonymous memory and the heap. MiB.
"""
import sys,subprocess,time,collections,os
def sample(pid):
    groups=collections.Counter()
    name=None
    for line in open(f'/proc/{pid}/smaps'):
        parts=line.split()
        if '-' in parts[0] and len(parts)>=5 and ':' in parts[3]:
            path=parts[5] if len(parts)>5 else '[anon]'
            base=os.path.basename(path)
            if path.startswith('/usr/lib') or path.startswith('/lib'): 
                grp='libcurl deps' if not any(k in base for k in ('libc.so','libm.so','libstdc++','libgcc','ld-linux','libcrypto','libssl','libcurl')) else base.split('.so')[0]
            elif path.startswith('/opt/swift'): grp='swift runtime libs'
            elif path.startswith('['): grp=path
            elif path=='[anon]': grp='[anon]'
            else: grp='the executable' if os.access(path, os.X_OK) else base
            name=grp
        elif parts[0]=='Rss:': groups[name]+=int(parts[1])
    return groups
argv=sys.argv[1:]
p=subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
best=None
while p.poll() is None:
    try: g=sample(p.pid)
    except Exception: break
    if best is None or sum(g.values())>sum(best.values()): best=g
    time.sleep(0.05)
tot=sum(best.values())
print(f"total {tot/1024:.1f} MiB  " + "  ".join(f"{k} {v/1024:.1f}" for k,v in best.most_common(9)))
