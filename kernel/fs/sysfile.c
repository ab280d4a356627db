// File-system system calls: argument checking, then fs.c and file.c.
//
// Every call returns a negative errno on failure. Paths are copied in
// with argstr (at most MAXPATH bytes); descriptors are checked by argfd;
// user buffers are checked by copyin/copyout where they are used.
//
// Threads share the descriptor table (p->tg.filelock guards it), so a
// descriptor may be closed, or given to another file, by another thread
// at any moment: argfd returns a reference of the call's own, which the
// call drops with fileclose when done; a file is filled in completely
// before fdalloc makes it visible; and close empties the slot and takes
// its reference in one step under the lock.
// Calls that change the file system run inside begin_op()/end_op().
// On a file system mounted read-only (a damaged image, see log.c) they
// fail with -EROFS before they start.

#include "types.h"
#include "riscv.h"
#include "defs.h"
#include "param.h"
#include "fsparam.h"
#include "errno.h"
#include "stat.h"
#include "spinlock.h"
#include "proc.h"
#include "fs.h"
#include "sleeplock.h"
#include "file.h"
#include "fcntl.h"

// Fetches the n-th argument as a descriptor and its file, with a new
// reference the caller drops with fileclose. Returns 0 or -EBADF.
int
argfd(int n, struct file **pf)
{
  int fd;
  struct proc *p = myprocess();

  argint(n, &fd);
  if (fd < 0 || fd >= NOFILE)
    return -EBADF;
  acquire(&p->tg.filelock);
  struct file *f = p->ofile[fd];
  if (f)
    *pf = filedup(f); // the slot's reference keeps f alive meanwhile
  release(&p->tg.filelock);
  return f ? 0 : -EBADF;
}

// Gives f[0..n) the lowest free descriptors, into fd[0..n): all of them or
// none. Each file passes its reference to its descriptor. Returns 0 or
// -EMFILE.
static int
fdalloc(struct file **f, int *fd, int n)
{
  struct proc *p = myprocess();
  int k = 0;

  acquire(&p->tg.filelock);
  for (int i = 0; i < NOFILE && k < n; i++)
    if (p->ofile[i] == 0)
      fd[k++] = i;
  for (int i = 0; k == n && i < n; i++)
    p->ofile[fd[i]] = f[i];
  release(&p->tg.filelock);
  return k == n ? 0 : -EMFILE;
}

// dup(fd): a new descriptor for fd's file.
uint64
sys_dup(void)
{
  struct file *f;
  int fd, r;

  if ((r = argfd(0, &f)) < 0)
    return r;
  if ((r = fdalloc(&f, &fd, 1)) < 0) {
    fileclose(f);
    return r;
  }
  return fd; // argfd's reference is the new descriptor's
}

// The arguments of read and write: (fd, user buffer, count).
// Returns 0, or a negative errno for a bad fd or a negative count.
static int
argrw(struct file **f, uint64 *p, int *n)
{
  int r;

  argaddr(1, p);
  argint(2, n);
  if ((r = argfd(0, f)) < 0)
    return r;
  if (*n < 0) {
    fileclose(*f);
    return -EINVAL;
  }
  return 0;
}

// read(fd, buf, n): the bytes read into buf, 0 at the end.
uint64
sys_read(void)
{
  struct file *f;
  int n, r;
  uint64 p;

  if ((r = argrw(&f, &p, &n)) < 0)
    return r;
  r = fileread(f, p, n);
  fileclose(f);
  return r;
}

// write(fd, buf, n): the bytes written from buf.
uint64
sys_write(void)
{
  struct file *f;
  int n, r;
  uint64 p;

  if ((r = argrw(&f, &p, &n)) < 0)
    return r;
  r = filewrite(f, p, n);
  fileclose(f);
  return r;
}

// close(fd): frees the descriptor.
uint64
sys_close(void)
{
  int fd;
  struct file *f;
  struct proc *p = myprocess();

  argint(0, &fd);
  if (fd < 0 || fd >= NOFILE)
    return -EBADF;
  acquire(&p->tg.filelock); // of two threads closing fd, one gets f
  f = p->ofile[fd];
  p->ofile[fd] = 0;
  release(&p->tg.filelock);
  if (f == 0)
    return -EBADF;
  fileclose(f);
  return 0;
}

// fstat(fd, st): fd's file's struct stat into st.
uint64
sys_fstat(void)
{
  struct file *f;
  uint64 st;
  int r;

  argaddr(1, &st);
  if ((r = argfd(0, &f)) < 0)
    return r;
  r = filestat(f, st);
  fileclose(f);
  return r;
}

// Makes new a name for the inode old names (not a directory).
// Returns 0 or a negative errno; -EMLINK if old has MAXLINK names.
static int
do_link(char *old, char *new)
{
  char name[DIRSIZ];
  struct inode *dp, *ip;
  int r;

  if ((r = namei_err(old, &ip)) < 0)
    return r;
  if ((r = ilock(ip)) < 0 || ip->type == T_DIR || ip->nlink >= MAXLINK) {
    if (r == 0)
      r = ip->type == T_DIR ? -EPERM : -EMLINK;
    iunlockput(ip);
    return r;
  }
  ip->nlink++;
  iupdate(ip);
  iunlock(ip);

  if ((r = nameiparent_err(new, name, &dp)) < 0)
    goto bad;
  if ((r = ilock(dp)) == 0)
    r = dp->dev != ip->dev ? -EXDEV : dirlink(dp, name, ip->inum);
  iunlockput(dp);
  if (r < 0)
    goto bad;
  iput(ip);
  return 0;

bad:
  ilock(ip);
  ip->nlink--;
  iupdate(ip);
  iunlockput(ip);
  return r;
}

// link(old, new): new names old's inode (not a directory).
uint64
sys_link(void)
{
  char new[MAXPATH], old[MAXPATH];
  int r;

  if ((r = argstr(0, old, MAXPATH)) < 0 || (r = argstr(1, new, MAXPATH)) < 0)
    return r;
  if (fs_readonly())
    return -EROFS;
  begin_op();
  r = do_link(old, new);
  end_op();
  return r;
}

// Is directory dp empty except for "." and ".."? Returns 1, 0, or -EIO
// for a damaged directory. Caller holds dp->lock.
static int
isdirempty(struct inode *dp)
{
  uint64 off;
  struct dirent de;
  int r;

  for (off = 2 * sizeof(de); off < dp->size; off += sizeof(de)) {
    if ((r = readi(dp, 0, (uint64)&de, off, sizeof(de))) != sizeof(de))
      return r < 0 ? r : -EIO;
    if (de.inum != 0)
      return 0;
  }
  return 1;
}

// Does directory dp's ".." name ip? Caller holds dp->lock.
static int
is_parent(struct inode *dp, struct inode *ip)
{
  struct inode *pp;
  int same;

  if (dirlookup(dp, "..", 0, &pp) < 0)
    return 0;
  same = pp == ip;
  iput(pp);
  return same;
}

// Removes the directory entry at path. An entry (other than "." and "..")
// that names its own directory or the directory's parent is damage, and
// following it would lock dp twice or a parent after its child (against
// the parent-then-child order everywhere else): refused with -EIO.
static int
do_unlink(char *path)
{
  struct inode *ip, *dp;
  struct dirent de;
  char name[DIRSIZ + 1] = { 0 }; // NUL-terminated for the message below
  uint off;
  int r;

  if ((r = nameiparent_err(path, name, &dp)) < 0)
    return r;
  if ((r = ilock(dp)) < 0)
    goto out;
  if (namecmp(name, ".") == 0 || namecmp(name, "..") == 0) {
    r = -EINVAL;
    goto out;
  }
  if ((r = dirlookup(dp, name, &off, &ip)) < 0)
    goto out;
  if (ip == dp || is_parent(dp, ip)) { // dirlookup already refuses ip == dp
    printf("fs: inode %d: entry '%s' names the directory's parent; not unlinking it\n", dp->inum,
        name);
    iput(ip);
    r = -EIO;
    goto out;
  }
  if ((r = ilock(ip)) < 0 || (ip->type == T_DIR && (r = isdirempty(ip)) <= 0)) {
    iunlockput(ip);
    r = r < 0 ? r : -ENOTEMPTY;
    goto out;
  }
  memset(&de, 0, sizeof(de));
  if ((r = writei(dp, 0, (uint64)&de, off, sizeof(de))) != sizeof(de)) {
    iunlockput(ip);
    r = r < 0 ? r : -EIO;
    goto out;
  }
  r = 0;
  if (ip->type == T_DIR) {
    // The child's ".." no longer names dp. A directory's count is at
    // least 1 + its subdirectories; below that the image is damaged,
    // and dropping to 0 would free a directory that is still named.
    if (dp->nlink > 1)
      dp->nlink--;
    else
      printf("fs: inode %d: link count too low for its subdirectories\n", dp->inum);
    iupdate(dp);
  }
  ip->nlink--;
  iupdate(ip);
  iunlockput(ip);
out:
  iunlockput(dp);
  return r;
}

// unlink(path): removes the name (a directory only if empty).
uint64
sys_unlink(void)
{
  char path[MAXPATH];
  int r;

  if ((r = argstr(0, path, MAXPATH)) < 0)
    return r;
  if (fs_readonly())
    return -EROFS;
  begin_op();
  r = do_unlink(path);
  end_op();
  return r;
}

// Links "." and ".." into the new directory ip inside dp.
// Caller holds both locks.
static int
dirinit(struct inode *dp, struct inode *ip)
{
  int r;

  if (dp->nlink >= MAXLINK)
    return -EMLINK;
  if ((r = dirlink(ip, ".", ip->inum)) < 0 || (r = dirlink(ip, "..", dp->inum)) < 0)
    return r;
  dp->nlink++; // for ".."
  iupdate(dp);
  return 0;
}

// Creates path as a new inode of the given type, or for T_FILE opens an
// existing file. Stores the inode, locked, in *ipp. Returns 0 or a
// negative errno. Caller is inside a transaction.
static int
create(char *path, short type, short major, short minor, struct inode **ipp)
{
  struct inode *ip, *dp;
  char name[DIRSIZ];
  int r;

  if ((r = nameiparent_err(path, name, &dp)) < 0)
    return r;
  if ((r = ilock(dp)) < 0) {
    iunlockput(dp);
    return r;
  }
  if ((r = dirlookup(dp, name, 0, &ip)) == 0) {
    iunlockput(dp);
    if ((r = ilock(ip)) < 0) {
      iunlockput(ip);
      return r;
    }
    if (type == T_FILE && (ip->type == T_FILE || ip->type == T_DEVICE)) {
      *ipp = ip;
      return 0;
    }
    r = (type == T_FILE && ip->type == T_DIR) ? -EISDIR : -EEXIST;
    iunlockput(ip);
    return r;
  }
  // dp may have been removed while this call waited for its lock (see
  // dirlink); checked before dirinit, which would count the new "..".
  if (r != -ENOENT || (r = dp->nlink < 1 ? -ENOENT : ialloc(dp->dev, type, &ip)) < 0) {
    iunlockput(dp);
    return r;
  }
  ip->major = major; // ialloc returned it locked
  ip->minor = minor;
  ip->nlink = 1;
  iupdate(ip);
  if ((type == T_DIR && (r = dirinit(dp, ip)) < 0) || (r = dirlink(dp, name, ip->inum)) < 0) {
    ip->nlink = 0; // iput frees it and its blocks
    iupdate(ip);
    iunlockput(ip);
    iunlockput(dp);
    return r;
  }
  iunlockput(dp);
  *ipp = ip;
  return 0;
}

// Undoes a device's open (devsw's open hook) for an open file that was
// never made visible. Does nothing for any other inode.
static void
devclose(struct inode *ip)
{
  if (ip->type == T_DEVICE && devsw[ip->major].close)
    devsw[ip->major].close();
}

// Looks up path for an open per omode (no O_CREATE, or a read-only file
// system) and locks it into *ipp. Returns 0, or a negative errno with
// nothing held: -EROFS for a creation or a write on a read-only file
// system, -EISDIR for a directory opened to write.
static int
open_existing(char *path, int omode, struct inode **ipp)
{
  struct inode *ip;
  int r;

  if ((r = namei_err(path, &ip)) < 0)
    return r == -ENOENT && (omode & O_CREATE) ? -EROFS : r;
  if ((r = ilock(ip)) < 0) {
    iunlockput(ip);
    return r;
  }
  if (ip->type == T_DIR && omode != O_RDONLY) {
    iunlockput(ip);
    return -EISDIR;
  }
  if (fs_readonly() && ip->type != T_DEVICE && (omode & (O_WRONLY | O_RDWR | O_TRUNC))) {
    iunlockput(ip);
    return -EROFS;
  }
  *ipp = ip;
  return 0;
}

// For a locked device inode: its driver's open (devsw's open hook).
// Returns 0 (also for any other inode), or a negative errno: -EINVAL for
// a major number out of range, -ENXIO for an absent driver (no read and
// no write), or the driver's refusal.
static int
devopen(struct inode *ip)
{
  if (ip->type != T_DEVICE)
    return 0;
  if (ip->major < 0 || ip->major >= NDEV)
    return -EINVAL;
  if (!devsw[ip->major].read && !devsw[ip->major].write)
    return -ENXIO;
  return devsw[ip->major].open ? devsw[ip->major].open() : 0;
}

// Opens the inode at path per omode. Caller is inside a transaction.
// Returns the new descriptor or a negative errno: -ENXIO for a device
// file whose driver is absent (no read and no write in devsw), or the
// driver's refusal (e.g. -EBUSY for /port while it is open).
static int
do_open(char *path, int omode)
{
  struct inode *ip;
  struct file *f;
  int fd, r;

  if ((omode & O_CREATE) && !fs_readonly())
    r = create(path, T_FILE, 0, 0, &ip);
  else
    r = open_existing(path, omode, &ip);
  if (r < 0)
    return r;
  if ((r = devopen(ip)) < 0) {
    iunlockput(ip);
    return r;
  }
  if ((f = filealloc()) == 0) {
    devclose(ip);
    iunlockput(ip);
    return -ENFILE;
  }
  f->type = ip->type == T_DEVICE ? FD_DEVICE : FD_INODE;
  f->major = ip->major;
  f->off = 0;
  f->ip = idup(ip); // f's own: once fd is visible, another thread may close it
  f->readable = !(omode & O_WRONLY);
  f->writable = (omode & O_WRONLY) || (omode & O_RDWR);
  if ((r = fdalloc(&f, &fd, 1)) < 0) {
    f->type = FD_NONE; // never visible: free f alone, and put f's reference
    fileclose(f);      // here (fileclose's would start a nested transaction)
    devclose(ip);
    iput(ip);
    iunlockput(ip);
    return r;
  }
  if ((omode & O_TRUNC) && ip->type == T_FILE)
    itrunc(ip);
  iunlockput(ip);
  return fd;
}

// open(path, omode): a new descriptor (see do_open).
uint64
sys_open(void)
{
  char path[MAXPATH];
  int omode, r;

  argint(1, &omode);
  if ((r = argstr(0, path, MAXPATH)) < 0)
    return r;
  begin_op();
  r = do_open(path, omode);
  end_op();
  return r;
}

// mkdir(path): a new empty directory.
uint64
sys_mkdir(void)
{
  char path[MAXPATH];
  struct inode *ip;
  int r;

  if ((r = argstr(0, path, MAXPATH)) < 0)
    return r;
  if (fs_readonly())
    return -EROFS;
  begin_op();
  if ((r = create(path, T_DIR, 0, 0, &ip)) == 0)
    iunlockput(ip);
  end_op();
  return r;
}

// mknod(path, major, minor): a new device file (major below NDEV).
uint64
sys_mknod(void)
{
  char path[MAXPATH];
  struct inode *ip;
  int major, minor, r;

  argint(1, &major);
  argint(2, &minor);
  if ((r = argstr(0, path, MAXPATH)) < 0)
    return r;
  if (major < 0 || major >= NDEV)
    return -EINVAL;
  if (fs_readonly())
    return -EROFS;
  begin_op();
  r = create(path, T_DEVICE, major, minor, &ip);
  if (r == 0)
    iunlockput(ip);
  end_op();
  return r;
}

// chdir(path): path, a directory, becomes the process's working directory.
uint64
sys_chdir(void)
{
  char path[MAXPATH];
  struct inode *ip, *old;
  struct proc *p = myprocess();
  int r;

  if ((r = argstr(0, path, MAXPATH)) < 0)
    return r;
  begin_op();
  if ((r = namei_err(path, &ip)) < 0) {
    end_op();
    return r;
  }
  if ((r = ilock(ip)) < 0 || ip->type != T_DIR) {
    iunlockput(ip);
    end_op();
    return r < 0 ? r : -ENOTDIR;
  }
  iunlock(ip);
  acquire(&p->tg.filelock);
  old = p->cwd;
  p->cwd = ip;
  release(&p->tg.filelock);
  iput(old);
  end_op();
  return 0;
}

// pipe(fds): a new pipe; its read and write descriptors into fds[0], fds[1].
uint64
sys_pipe(void)
{
  uint64 fdarray;
  struct file *rf, *wf;
  int fd[2] = { -1, -1 }, r;
  struct proc *p = myprocess();

  argaddr(0, &fdarray);
  // The array is checked before the descriptors exist: once they are
  // visible, another thread may use or close them, so they cannot be
  // taken back. (Written once, it stays writable: a process with threads
  // cannot shrink its memory.)
  if (copyout(p->pagetable, fdarray, fd, sizeof(fd)) < 0)
    return -EFAULT;
  if ((r = pipealloc(&rf, &wf)) < 0)
    return r;
  struct file *f[2] = { rf, wf };
  if ((r = fdalloc(f, fd, 2)) < 0) {
    fileclose(rf);
    fileclose(wf);
    return r;
  }
  return copyout(p->pagetable, fdarray, fd, sizeof(fd)) < 0 ? -EFAULT : 0;
}
