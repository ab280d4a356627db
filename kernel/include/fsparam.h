// Sizes of the file system's in-memory tables and of its log.
// None of these is a limit a user can hit with a panic: when a table is
// full, the call that wanted an entry fails with an error code (NFILE,
// NINODE) or waits for one to come free (NBUF).
#ifndef AISVC_FSPARAM_H
#define AISVC_FSPARAM_H

#define NFILE       256               // open files in the system (-ENFILE beyond)
#define NINODE      128               // in-memory inodes (-ENFILE beyond)
#define MAXOPBLOCKS 64                // most blocks one file-system operation writes
#define LOGBLOCKS   (MAXOPBLOCKS * 3) // log data blocks on disk
#define NBUF        (LOGBLOCKS + 64)  // buffer cache: the log pins up to LOGBLOCKS
#define BIOMAXSEGS  128               // most data segments in one disk request (512 KiB)
#define FASTREADMIN 4                 // readi() uses direct DMA from this many blocks on
#define FASTREADMAX 256               // most blocks (1 MiB) in one direct read request
#define ALLOCWINDOW BIOMAXSEGS        // blocks balloc sets aside for one file's run

#endif
