// Kernel limits, one per line.
#ifndef AISVC_PARAM_H
#define AISVC_PARAM_H

#define NPROC       128          // process table slots; fork fails with -EAGAIN beyond
#define NCPU        8            // harts the kernel can run on; others park
#define NOFILE      16           // open files per process
#define NMAP        64           // file mappings per process (mmap)
#define MAXARG      288          // exec arguments: a command line of 255 prompt ids fits
#define MAXARGLEN   1024         // bytes per exec argument, including the NUL
#define MAXPATH     256          // path name length, including the NUL
#define ROOTDEV     1            // device number of the file system disk
#define KSTACKPAGES 4            // kernel stack per process (16 KiB), guard page below
#define USTACKSIZE  (256 * 1024) // user stack, guard page below
#define TICK_HZ     10           // sleep()/uptime() ticks per second (user API)
#define SCHED_HZ    100          // timer interrupts (time slices) per second
#define TIMEBASE_HZ 10000000     // the time CSR's rate on QEMU virt

#endif
