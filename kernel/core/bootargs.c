// The boot command line: the text QEMU's -append puts in the device
// tree's /chosen/bootargs (it does so with -bios none too), read once at
// boot by hart 0. Only whoever starts the machine chooses it; no running
// program can change it.
//
// It is a list of words separated by spaces. A word with a dot is the
// kernel's, "subsystem.name=value" (ai.reqid_max in ai_table.c); every
// other word is an argument of /init (start_init in proc.c), which is how
// the host tells init how to set the system up (aiworker=console:
// docs/AI_SERVICE.md, "The worker right"). Unknown words are ignored by
// whoever reads them.
#include "kernel/include/types.h"
#include "kernel/include/defs.h"

#define BOOTARGS_MAX  256 // bytes of command line kept, NUL included
#define BOOTWORDS_MAX 16  // words kept

static char line[BOOTARGS_MAX];
static char *word[BOOTWORDS_MAX];
static int nword;

// Reads the command line from the device tree at fdt, says what it is,
// and splits it into words. Hart 0 at boot, before any process exists.
void
bootargs_init(uint64 fdt)
{
  char *p = line;

  if (fdt_bootargs(fdt, line, sizeof(line)) == 0)
    return;
  printf("aisvc: boot arguments: %s\n", line);
  for (;;) {
    while (*p == ' ')
      *p++ = 0;
    if (*p == 0)
      break;
    if (nword == BOOTWORDS_MAX) {
      printf("aisvc: more than %d boot arguments; ignoring from %s\n", BOOTWORDS_MAX, p);
      break;
    }
    word[nword++] = p;
    while (*p != 0 && *p != ' ')
      p++;
  }
}

// Does s hold a dot (a kernel word, e.g. ai.reqid_max)?
static int
has_dot(const char *s)
{
  for (; *s; s++)
    if (*s == '.')
      return 1;
  return 0;
}

// Appends the words for /init (those without a dot) to argv[1..], leaving
// room for the terminating 0 in argv[max - 1]. Returns argc (argv[0]
// counted); argv[argc] is set to 0.
int
bootargs_for_init(char **argv, int max)
{
  int argc = 1;

  for (int i = 0; i < nword && argc < max - 1; i++)
    if (!has_dot(word[i]))
      argv[argc++] = word[i];
  argv[argc] = 0;
  return argc;
}

// The kernel's word "key=N" with N decimal in [lo, hi]: returns 1 and sets
// *val. Returns 0 when the word is absent; a malformed or out-of-range
// value is ignored with a log line, so a typo never stops the boot.
int
bootarg_num(const char *key, uint64 lo, uint64 hi, uint64 *val)
{
  int klen = strlen(key);

  for (int i = 0; i < nword; i++) {
    if (strncmp(word[i], key, klen) != 0 || word[i][klen] != '=')
      continue;
    const char *d = word[i] + klen + 1;
    uint64 v = 0;
    int n = 0;
    for (; *d >= '0' && *d <= '9' && v <= hi; d++, n++)
      v = v * 10 + (*d - '0');
    if (n == 0 || *d != 0 || v < lo || v > hi) {
      printf(
          "aisvc: ignoring boot argument %s (want %s=N, %lu <= N <= %lu)\n", word[i], key, lo, hi);
      return 0;
    }
    *val = v;
    return 1;
  }
  return 0;
}
