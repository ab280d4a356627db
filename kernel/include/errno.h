// Error codes, shared by the kernel and user programs.
// A system call that fails returns the negated code (e.g. -ENOENT);
// user/ulib's strerror() turns a code into words.
#ifndef AISVC_ERRNO_H
#define AISVC_ERRNO_H

#define EPERM        1  // operation not permitted
#define ENOENT       2  // no such file or directory
#define ESRCH        3  // no such process
#define EINTR        4  // interrupted (the process was killed)
#define EIO          5  // I/O error
#define ENXIO        6  // no such device (a device file without its driver)
#define E2BIG        7  // argument list too long
#define ENOEXEC      8  // not an executable (bad ELF)
#define EBADF        9  // bad file descriptor
#define ECHILD       10 // no children to wait for
#define EAGAIN       11 // would block
#define ENOMEM       12 // out of memory
#define EFAULT       14 // bad address
#define EBUSY        16 // resource busy
#define EEXIST       17 // file exists
#define EXDEV        18 // cross-device link
#define ENOTDIR      20 // not a directory
#define EISDIR       21 // is a directory
#define EINVAL       22 // invalid argument
#define ENFILE       23 // file table full
#define EMFILE       24 // too many open files in this process
#define EFBIG        27 // file too large
#define ENOSPC       28 // no space left on the disk
#define EROFS        30 // read-only file system (a damaged image)
#define EMLINK       31 // too many links
#define EPIPE        32 // broken pipe
#define ERANGE       34 // result out of range
#define ENAMETOOLONG 36 // file name too long
#define ENOSYS       38 // no such system call
#define ENOTEMPTY    39 // directory not empty

#endif
