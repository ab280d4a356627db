# aisvc: kernel, guest programs, images, models and tests.
#
#   make deps        install the toolchain, QEMU and the Python package (once)
#   make             kernel + guest programs
#   make qemu        boot the guest with a shell         (CPUS=, RAM= to change)
#   make qemu-smol   ... with SmolLM2 at /AI/SMOL         (exports it when missing)
#   make test        lint + the test suite (boots the guest under QEMU)
#
# Knobs (override on the command line, e.g. `make qemu CPUS=2 RAM=2G`):
CPUS    ?= 1
RAM     ?= 256M
VENV    ?= .venv
PYTHON  ?= $(VENV)/bin/python
BUILD   := build
FSIMG   := $(BUILD)/fs.img
K       := kernel
U       := user

# ---------------------------------------------------------------- toolchain
# Debian ships riscv64-unknown-elf-; riscv64-linux-gnu- also builds freestanding code.
ifndef TOOLPREFIX
TOOLPREFIX := $(shell for p in riscv64-unknown-elf- riscv64-linux-gnu- riscv64-elf-; do \
	if command -v $${p}gcc >/dev/null 2>&1; then echo $$p; break; fi; done)
endif
QEMU ?= $(shell command -v qemu-system-riscv64 2>/dev/null)

CC      := $(TOOLPREFIX)gcc
LD      := $(TOOLPREFIX)ld
OBJDUMP := $(TOOLPREFIX)objdump
OBJCOPY := $(TOOLPREFIX)objcopy

.PHONY: all toolchain-check qemu-check
all: kernel uprogs

toolchain-check:
	@if [ -z "$(TOOLPREFIX)" ]; then \
	  echo "error: no RISC-V cross compiler found (tried riscv64-unknown-elf-gcc, riscv64-linux-gnu-gcc)."; \
	  echo "  run 'make deps' (installs gcc-riscv64-unknown-elf), or set TOOLPREFIX=<prefix>"; exit 1; fi

qemu-check:
	@if [ -z "$(QEMU)" ]; then \
	  echo "error: qemu-system-riscv64 not found."; \
	  echo "  run 'make deps' (installs qemu-system-misc), or set QEMU=/path/to/qemu-system-riscv64"; exit 1; fi

# ---------------------------------------------------------------- flags
COMMON_CFLAGS := -Wall -Werror -O2 -g -MD -mcmodel=medany -ffreestanding -fno-common \
	-nostdlib -fno-builtin-printf -fno-stack-protector -fno-pie -no-pie \
	-I. -I$(K)/include
# The kernel never touches FP registers except to save/restore user state
# (kernel/arch/riscv/fpu.S is assembled with FP enabled).
KCFLAGS := $(COMMON_CFLAGS) -march=rv64imac_zicsr_zifencei -mabi=lp64 -fno-omit-frame-pointer
# User code gets the full rv64gc with hard-float doubles. -ffp-contract=off:
# no fused multiply-add, so guest float results equal the numpy reference's.
UCFLAGS := $(COMMON_CFLAGS) -march=rv64gc -mabi=lp64d -ffp-contract=off
LDFLAGS := -z max-page-size=4096

# ================================================================ kernel
# [kernel-core] boot, traps, VM, processes, console.
KERNEL_CORE_SRCS :=

# [kernel-fs] buffer cache, log, inodes, files, pipes, virtio-blk.
KERNEL_FS_SRCS :=

KERNEL_SRCS := $(KERNEL_CORE_SRCS) $(KERNEL_FS_SRCS)
KERNEL_OBJS := $(patsubst %.c,$(BUILD)/%.o,$(patsubst %.S,$(BUILD)/%.o,$(KERNEL_SRCS)))
KERNEL_ELF  := $(BUILD)/kernel/kernel

# ================================================================ user
# [user-lib] objects linked into every guest program.
ULIB_SRCS :=
ULIB_OBJS := $(patsubst %.c,$(BUILD)/%.o,$(patsubst %.S,$(BUILD)/%.o,$(ULIB_SRCS)))

# [uprogs] one line per guest program (user/NAME.c -> /NAME in the image).
UPROGS :=

UPROG_ELFS := $(addprefix $(BUILD)/user/_,$(UPROGS))

# ================================================================ rules
$(BUILD)/kernel/%.o: $(K)/%.c | toolchain-check
	@mkdir -p $(dir $@)
	$(CC) $(KCFLAGS) -c -o $@ $<

$(BUILD)/kernel/%.o: $(K)/%.S | toolchain-check
	@mkdir -p $(dir $@)
	$(CC) $(KCFLAGS) -c -o $@ $<

$(BUILD)/user/%.o: $(U)/%.c | toolchain-check
	@mkdir -p $(dir $@)
	$(CC) $(UCFLAGS) -c -o $@ $<

$(BUILD)/user/%.o: $(U)/%.S | toolchain-check
	@mkdir -p $(dir $@)
	$(CC) $(UCFLAGS) -c -o $@ $<

.PHONY: kernel uprogs
kernel: $(KERNEL_ELF)
uprogs: $(UPROG_ELFS)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

# ================================================================ images and QEMU
# [fsimg]

# [qemu]

# ================================================================ models
# [models]

# ================================================================ set-up, tests
.PHONY: deps test lint clean
deps:
	@bash tools/setup.sh

lint:
	$(VENV)/bin/ruff check pyaisvc tests tools

test: all lint
	$(PYTHON) -m pytest -q

clean:
	rm -rf $(BUILD)
