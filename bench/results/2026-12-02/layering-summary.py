import sys,statistics as st,collections
d=collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(sys.argv[1]):
    f=line.split()
    if len(f)<7: continue
    which=f[1]; cfg=" ".join(f[2:5])
    for kv in f[6:]:
        k,v=kv.split(':'); d[(cfg,int(k))][which].append(float(v))
print("%-16s %9s %9s %9s %6s %9s %9s %6s"%("config","bytes","old min","new min","ratio","old med","new med","ratio"))
for (cfg,k) in sorted(d, key=lambda x:(x[0],x[1])):
    o=d[(cfg,k)]['old']; n=d[(cfg,k)]['new']
    if not o or not n: continue
    print("%-16s %9d %9.2f %9.2f %6.2f %9.2f %9.2f %6.2f"%(cfg,k,min(o),min(n),min(n)/min(o),st.median(o),st.median(n),st.median(n)/st.median(o)))
