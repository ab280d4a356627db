// portecho: drives the gateway's port device (/port) for tests/test_port.py.
//
//   portecho echo         every byte read from /port is written back to it,
//                         until the process is killed
//   portecho send N SEED  writes N bytes of the pattern (SEED, below) to /port
//   portecho recv N       reads N bytes from /port and prints "recv N SUM"
//   portecho read         one blocking read of /port; prints what it returned
//   portecho forkread     opens /port and exits; a child it forked keeps the
//                         open file, reads once and prints what it returned
//
// The pattern's byte i is (i * 131 + SEED + (i >> 12)) & 0xff; SUM is the
// Adler-32 of the bytes in hex (zlib.adler32 on the host). Each
// mode prints "portecho: ready" once /port is open, so the test knows when
// to start talking.
#include "user/lib/user.h"
#include "kernel/include/fcntl.h"

#define CHUNK 8192

static char buf[CHUNK];

// Byte i of the send pattern.
static int
pattern(uint i, int seed)
{
  return (i * 131 + seed + (i >> 12)) & 0xff;
}

static int
openport(void)
{
  int fd = open("/port", O_RDWR);
  if (fd < 0) {
    fprintf(2, "portecho: cannot open /port: %s\n", strerror(fd));
    exit(1);
  }
  printf("portecho: ready\n");
  return fd;
}

// Writes all n bytes of buf, or exits saying why.
static void
writeall(int fd, char *p, int n)
{
  while (n > 0) {
    int w = write(fd, p, n);
    if (w <= 0) {
      fprintf(2, "portecho: write: %s\n", strerror(w));
      exit(1);
    }
    p += w;
    n -= w;
  }
}

static void
echo(int fd)
{
  for (;;) {
    int n = read(fd, buf, CHUNK);
    if (n <= 0) {
      fprintf(2, "portecho: read: %s\n", strerror(n));
      exit(1);
    }
    writeall(fd, buf, n);
  }
}

static void
send(int fd, uint total, int seed)
{
  uint done = 0;

  while (done < total) {
    uint m = total - done < CHUNK ? total - done : CHUNK;
    for (uint i = 0; i < m; i++)
      buf[i] = pattern(done + i, seed);
    writeall(fd, buf, m);
    done += m;
  }
  printf("sent %u\n", total);
}

static void
recv(int fd, uint total)
{
  uint done = 0, a = 1, b = 0;

  while (done < total) {
    int n = read(fd, buf, total - done < CHUNK ? total - done : CHUNK);
    if (n <= 0) {
      fprintf(2, "portecho: read: %s\n", strerror(n));
      exit(1);
    }
    for (int i = 0; i < n; i++) {
      a = (a + (uchar)buf[i]) % 65521;
      b = (b + a) % 65521;
    }
    done += n;
  }
  printf("recv %u %x\n", total, (b << 16) | a);
}

// Hands the open port fd to a child, which reads once and prints what it
// got; the parent exits at once, so the child holds the last reference.
static void
forkread(int fd)
{
  int pid = fork();

  if (pid < 0) {
    fprintf(2, "portecho: fork: %s\n", strerror(pid));
    exit(1);
  }
  if (pid == 0) {
    int n = read(fd, buf, CHUNK);
    printf("child read returned %d\n", n);
  }
}

int
main(int argc, char *argv[])
{
  if (argc == 2 && strcmp(argv[1], "echo") == 0) {
    echo(openport());
  } else if (argc == 4 && strcmp(argv[1], "send") == 0) {
    send(openport(), atoi(argv[2]), atoi(argv[3]));
  } else if (argc == 3 && strcmp(argv[1], "recv") == 0) {
    recv(openport(), atoi(argv[2]));
  } else if (argc == 2 && strcmp(argv[1], "read") == 0) {
    int n = read(openport(), buf, CHUNK);
    printf("read returned %d\n", n);
  } else if (argc == 2 && strcmp(argv[1], "forkread") == 0) {
    forkread(openport());
  } else {
    fprintf(2, "usage: portecho echo | send N SEED | recv N | read | forkread\n");
    exit(2);
  }
  exit(0);
}
