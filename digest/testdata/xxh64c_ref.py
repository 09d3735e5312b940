# Independent XXH64 and xxh64c, written from the xxHash specification
# (doc/xxhash_spec.md) and docs/checksum.md, to cross-check the Go package
# and the golden values in docs/checksum.md. Run: python3 xxh64c_ref.py
import struct
M=(1<<64)-1
P1=11400714785074694791;P2=14029467366897019727;P3=1609587929392839161;P4=9650029242287828579;P5=2870177450012600261
rotl=lambda x,r:((x<<r)|(x>>(64-r)))&M
def rnd(a,v): a=(a+v*P2)&M; a=rotl(a,31); return (a*P1)&M
def merge(a,v): a^=rnd(0,v); return (a*P1+P4)&M
def xxh64(b,seed):
    n=len(b); i=0
    if n>=32:
        v=[(seed+P1+P2)&M,(seed+P2)&M,seed&M,(seed-P1)&M]
        while i+32<=n:
            for k in range(4): v[k]=rnd(v[k],struct.unpack_from('<Q',b,i+8*k)[0])
            i+=32
        h=(rotl(v[0],1)+rotl(v[1],7)+rotl(v[2],12)+rotl(v[3],18))&M
        for k in range(4): h=merge(h,v[k])
    else: h=(seed+P5)&M
    h=(h+n)&M
    while i+8<=n:
        h^=rnd(0,struct.unpack_from('<Q',b,i)[0]); h=(rotl(h,27)*P1+P4)&M; i+=8
    if i+4<=n:
        h^=(struct.unpack_from('<I',b,i)[0]*P1)&M; h=(rotl(h,23)*P2+P3)&M; i+=4
    while i<n:
        h^=(b[i]*P5)&M; h=(rotl(h,11)*P1)&M; i+=1
    h^=h>>33; h=(h*P2)&M; h^=h>>29; h=(h*P3)&M; h^=h>>32
    return h
assert xxh64(b"",0)==0xef46db3751d8e999 and xxh64(b"a",0)==0xd24ec4f1a98c6e5b and xxh64(b"abc",0)==0x44bc2cf5ad770999
g=2654435761; buf=bytearray(222)
for i in range(222): buf[i]=g>>56; g=(g*11400714785074694797)&M
assert xxh64(bytes(buf[:222]),2654435761)==0x20CB8AB7AE10C14A and xxh64(bytes(buf[:14]),0)==0x8282DCC4994E35C8
C=65536
def xxh64c(b):
    lst=b''.join(struct.pack('<Q',xxh64(b[i*C:(i+1)*C],i)) for i in range((len(b)+C-1)//C))
    return xxh64(lst,len(b))
pat=lambda n: bytes(i%251 for i in range(n))
for n in [0,1,C,C+1,1<<20,3*C+100]:
    print(n, "xxh64c:%016x"%xxh64c(pat(n)))
