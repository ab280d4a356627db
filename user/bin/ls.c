// ls: list files. For each directory argument (default ".") one line per
// entry, for a file one line: type, inode number, size in bytes, name.

#include "user/lib/user.h"
#include "kernel/include/fcntl.h"
#include "kernel/include/stat.h"
#include "kernel/include/fs.h"
#include "kernel/include/param.h"

// The word for a file type.
static const char *typename(int type)
{
  switch (type) {
  case T_DIR: return "dir";
  case T_FILE: return "file";
  case T_DEVICE: return "dev";
  }
  return "?";
}

// One line of the listing: type, inode number, size, name.
static void
show(struct stat *st, const char *name)
{
  printf("%-4s %5d %10lu %s\n", typename(st->type), st->ino, st->size, name);
}

// List the entries of the open directory fd, whose path is dir.
// Returns 0, or 1 if anything failed.
static int
listdir(int fd, const char *dir)
{
  struct dirent de[BSIZE / sizeof(struct dirent)];
  char name[DIRSIZ + 1], path[MAXPATH];
  struct stat st;
  int n, i, r, status = 0;

  while ((n = read(fd, de, sizeof(de))) > 0) {
    for (i = 0; i < n / sizeof(de[0]); i++) {
      if (de[i].inum == 0)
        continue;
      // A name of exactly DIRSIZ characters has no terminator on disk.
      memmove(name, de[i].name, DIRSIZ);
      name[DIRSIZ] = 0;
      if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path)) {
        fprintf(2, "ls: %s/%s: %s\n", dir, name, strerror(ENAMETOOLONG));
        status = 1;
      } else if ((r = stat(path, &st)) < 0) {
        fprintf(2, "ls: cannot stat %s: %s\n", path, strerror(r));
        status = 1;
      } else {
        show(&st, name);
      }
    }
  }
  if (n < 0) {
    fprintf(2, "ls: cannot read %s: %s\n", dir, strerror(n));
    status = 1;
  }
  return status;
}

// Lists path (a directory's entries, or the file itself); 1 if it could
// not be listed, else 0.
static int
ls(const char *path)
{
  struct stat st;
  int fd, r, status = 0;

  if ((fd = open(path, O_RDONLY)) < 0) {
    fprintf(2, "ls: cannot open %s: %s\n", path, strerror(fd));
    return 1;
  }
  if ((r = fstat(fd, &st)) < 0) {
    fprintf(2, "ls: cannot stat %s: %s\n", path, strerror(r));
    status = 1;
  } else if (st.type == T_DIR) {
    status = listdir(fd, path);
  } else {
    show(&st, path);
  }
  close(fd);
  return status;
}

// ls [PATH...]: exit status 1 if a path could not be listed.
int
main(int argc, char *argv[])
{
  int i, status = 0;

  if (argc < 2)
    exit(ls("."));
  for (i = 1; i < argc; i++)
    status |= ls(argv[i]);
  exit(status);
}
