// The console: the UART as a line-edited terminal, and the CONSOLE device
// that user programs read and write through file descriptors 0, 1 and 2.
//
// Input arrives one byte per UART interrupt (consoleintr). It is echoed
// and collected in cons.buf until a whole line is there, so a reader sees
// nothing until the user presses Enter, and may still edit the line:
//   backspace (^H or DEL) erases a character, ^U erases the line,
//   ^D ends the input (a read at the start of a line returns 0),
//   ^C interrupts (below), ^P prints the process list.
// cons.buf is circular: r is the next byte to read, w the end of the
// completed lines, e the end of the line being edited (r <= w <= e).
//
// ^C and the foreground job. Every process belongs to a process group
// (p->pgid, inherited by fork, changed with setpgid()). The console has
// one foreground group, cons.fg, set with setfg(); 0 means none. The
// interactive shell puts each job (a pipeline, all its commands) into a
// group of its own, makes it the foreground while it waits for it, and
// sets 0 again before it prompts; background jobs (&) get their own group
// and never become the foreground. ^C then:
//   1. echoes "^C" and a newline, and drops all input not yet read (the
//      line being edited and lines typed ahead), so nothing of it reaches
//      the next reader;
//   2. kills every process of the foreground group, as kill() does: one
//      asleep in any system call wakes and returns -EINTR, one computing
//      in user space exits at its next timer interrupt (init is never
//      killed);
//   3. if that killed nothing (no foreground job), hands the reader an
//      empty line instead, so a shell at its prompt prompts again.
// The shell itself is never in the foreground group, so it survives, and
// so do background jobs. Anyone may call setfg(): the console trusts its
// programs as xv6 does.
#include "kernel/include/types.h"
#include "kernel/include/param.h"
#include "kernel/include/errno.h"
#include "kernel/include/spinlock.h"
#include "kernel/include/sleeplock.h"
#include "kernel/include/fs.h"
#include "kernel/include/file.h"
#include "kernel/include/riscv.h"
#include "kernel/include/defs.h"
#include "kernel/include/proc.h"

#define BACKSPACE 0x100
#define C(x)      ((x) - '@') // control key
#define INPUT_BUF 4096        // the longest line a user can type

static struct {
  struct spinlock lock;
  // lock must be held when using these:
  char buf[INPUT_BUF];
  uint r;
  uint w;
  uint e;
  int fg; // the foreground process group, or 0
} cons;

// Writes one character; BACKSPACE also erases it on the terminal.
void
consputc(int c)
{
  if (c == BACKSPACE) {
    uartputc_sync('\b');
    uartputc_sync(' ');
    uartputc_sync('\b');
  } else {
    uartputc_sync(c);
  }
}

// The console's write: n bytes from src (a user address if user_src).
// Returns the bytes written, or -EFAULT if src is bad before any was.
int
consolewrite(int user_src, uint64 src, int n)
{
  char chunk[128];
  int done = 0;

  while (done < n) {
    int m = n - done < sizeof(chunk) ? n - done : sizeof(chunk);
    if (either_copyin(chunk, user_src, src + done, m) < 0)
      return done > 0 ? done : -EFAULT;
    uartwrite(chunk, m);
    done += m;
  }
  return done;
}

// The console's read: up to n bytes of the next line into dst (a user
// address if user_dst). Sleeps until a line is complete. Returns the bytes
// read (0 at ^D), -EINTR if the process is killed while waiting, or
// -EFAULT if dst is bad before any byte was copied.
int
consoleread(int user_dst, uint64 dst, int n)
{
  int got = 0;

  acquire(&cons.lock);
  while (got < n) {
    while (cons.r == cons.w) {
      if (killed(myproc())) {
        release(&cons.lock);
        return -EINTR;
      }
      sleep(&cons.r, &cons.lock);
    }
    char c = cons.buf[cons.r++ % INPUT_BUF];
    if (c == C('D')) {
      // Keep the ^D for the next read, so that one returns 0.
      if (got > 0)
        cons.r--;
      break;
    }
    if (either_copyout(user_dst, dst + got, &c, 1) < 0) {
      cons.r--;
      got = got > 0 ? got : -EFAULT;
      break;
    }
    got++;
    if (c == '\n')
      break;
  }
  release(&cons.lock);
  return got;
}

// Erases the last character of the line being edited, if any.
static int
erase_one(void)
{
  if (cons.e == cons.w || cons.buf[(cons.e - 1) % INPUT_BUF] == '\n')
    return 0;
  cons.e--;
  consputc(BACKSPACE);
  return 1;
}

// ^C (see the top of the file). cons.lock is held.
static void
interrupt(void)
{
  consputc('^');
  consputc('C');
  consputc('\n');
  cons.r = cons.w = cons.e;
  if (cons.fg != 0 && kill_pgrp(cons.fg) > 0)
    return;
  cons.buf[cons.e++ % INPUT_BUF] = '\n';
  cons.w = cons.e;
  wakeup(&cons.r);
}

// setfg(pgid): makes process group pgid the console's foreground (0:
// none). Returns the previous one, or -EINVAL for pgid < 0.
uint64
sys_setfg(void)
{
  int pgid;

  argint(0, &pgid);
  if (pgid < 0)
    return -EINVAL;
  acquire(&cons.lock);
  int old = cons.fg;
  cons.fg = pgid;
  release(&cons.lock);
  return old;
}

// Called by uartintr() for each byte typed.
void
consoleintr(int c)
{
  acquire(&cons.lock);
  switch (c) {
  case C('P'): procdump(); break;
  case C('C'): interrupt(); break;
  case C('U'):
    while (erase_one())
      ;
    break;
  case C('H'):
  case '\x7f': erase_one(); break;
  default:
    if (c == 0 || cons.e - cons.r >= INPUT_BUF)
      break;
    c = (c == '\r') ? '\n' : c;
    if (c != C('D'))
      consputc(c);
    cons.buf[cons.e++ % INPUT_BUF] = c;
    if (c == '\n' || c == C('D') || cons.e - cons.r == INPUT_BUF) {
      cons.w = cons.e;
      wakeup(&cons.r);
    }
    break;
  }
  release(&cons.lock);
}

void
consoleinit(void)
{
  initlock(&cons.lock, "cons");
  uartinit();
  devsw[CONSOLE].read = consoleread;
  devsw[CONSOLE].write = consolewrite;
}
