"""The floor of ``emu mpirun``'s 8-byte ping-pong on this machine: the same system calls and process
wake-ups as the emulator makes for it, and no other work.

    python scripts/bench_mpi_floor.py                 # 20,000 iterations, with and without the UDP hops
    python scripts/bench_mpi_floor.py --iters 50000 --hops 2,0

A small C program (below, compiled with the machine's ``cc`` into a temporary folder) runs three
processes as ``emu mpirun -n 2`` does: two ranks, each with a ``socketpair`` to the emulator, and the
emulator waiting in ``epoll_wait`` for either. Per iteration rank 0 writes its ``Send`` and ``Recv``
(one write, as the rank channel holds a call that needs no answer until the next that does) and reads
the answer; the emulator reads it, moves the message's frames across ``--hops`` loopback UDP
sockets (``sendto`` then ``recv``: on ``star:n=2`` a frame goes host -> switch -> host, two hops;
``--direct`` has none), and answers the other rank; then the same the other way. The wall time per
MPI call is the iteration's over 2, as ``bench_mpi_calls.py`` reports it: what these system calls and
the four process wake-ups per iteration cost here before any Python runs. Wall time only; it depends
on the machine and its load (say which).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

C_SOURCE = r'''
/* The floor of emu mpirun's ping-pong: the same system calls and process wake-ups, no work. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>

static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static void rd(int fd,char*b,int n){int g=0;while(g<n){int r=read(fd,b+g,n-g);if(r<=0)exit(3);g+=r;}}
static int udp(int port){int s=socket(AF_INET,SOCK_DGRAM,0);struct sockaddr_in a={0};a.sin_family=AF_INET;a.sin_port=htons(port);a.sin_addr.s_addr=htonl(0x7f000001);if(bind(s,(void*)&a,sizeof a)){perror("bind");exit(1);}return s;}
static void hop(int from,int to,int port){char f[128];struct sockaddr_in a={0};a.sin_family=AF_INET;a.sin_port=htons(port);a.sin_addr.s_addr=htonl(0x7f000001);
  memset(f,1,100);sendto(from,f,100,0,(void*)&a,sizeof a);if(recv(to,f,sizeof f,0)!=100)exit(4);}
int main(int argc,char**argv){
  int iters=argc>1?atoi(argv[1]):20000, hops=argc>2?atoi(argv[2]):2;
  int c0[2],c1[2]; socketpair(AF_UNIX,SOCK_STREAM,0,c0); socketpair(AF_UNIX,SOCK_STREAM,0,c1);
  for(int r=0;r<2;r++){ if(fork()==0){ int fd=r?c1[1]:c0[1]; char b[64]; memset(b,0,64);
      if(r==0){ for(int i=0;i<iters;i++){ write(fd,b,48); rd(fd,b,24);} }
      else { rd(fd,b,24); for(int i=0;i<iters-1;i++){ write(fd,b,48); rd(fd,b,24);} write(fd,b,48);} _exit(0);} }
  int base=40000+getpid()%20000; int s[3]; for(int i=0;i<3;i++) s[i]=udp(base+i);
  int ep=epoll_create1(0); struct epoll_event e={.events=EPOLLIN}; e.data.fd=c0[0]; epoll_ctl(ep,EPOLL_CTL_ADD,c0[0],&e); e.data.fd=c1[0]; epoll_ctl(ep,EPOLL_CTL_ADD,c1[0],&e);
  double t0=now(); char b[64]; memset(b,0,64);
  for(int i=0;i<2*iters;i++){ struct epoll_event ev; if(epoll_wait(ep,&ev,1,-1)!=1) return 5; int from=ev.data.fd; rd(from,b,48);
    for(int h=0;h<hops;h++) hop(s[h%3],s[(h+1)%3],base+(h+1)%3);
    write(from==c0[0]?c1[0]:c0[0],b,24); }
  double t1=now(); while(wait(NULL)>0); 
  printf("%d iterations, %d UDP hops per message: %.2f us per iteration, %.2f us per MPI call\n",iters,hops,(t1-t0)/iters*1e6,(t1-t0)/iters/2*1e6);
  return 0;}
'''


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--iters", type=int, default=20000, help="ping-pong iterations (default 20,000)")
    ap.add_argument("--hops", default="2,0", help="UDP hops per message, comma-separated (default 2,0)")
    a = ap.parse_args(argv)
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise SystemExit("bench_mpi_floor: no C compiler (cc or gcc) on PATH; install gcc")
    try:
        hops = [int(h) for h in a.hops.split(",")]
    except ValueError:
        raise SystemExit(f"bench_mpi_floor: --hops {a.hops!r} is not a comma-separated list of integers, e.g. 2,0")
    if a.iters < 1 or min(hops) < 0:
        raise SystemExit("bench_mpi_floor: --iters must be at least 1 and --hops at least 0")
    with tempfile.TemporaryDirectory(prefix="emu-floor-") as tmp:
        c, exe = os.path.join(tmp, "floor.c"), os.path.join(tmp, "floor")
        with open(c, "w") as f:
            f.write(C_SOURCE)
        subprocess.run([cc, "-O2", "-o", exe, c], check=True)
        print(f"load average before: {os.getloadavg()[0]:.2f} (the figures are wall time: a busy machine raises them)")
        for h in hops:
            r = subprocess.run([exe, str(a.iters), str(h)], capture_output=True, text=True, timeout=600)
            if r.returncode:
                raise SystemExit(f"bench_mpi_floor: the floor program exited {r.returncode}: {r.stderr.strip()}")
            print(r.stdout.strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
