# aisvc: kernel, guest programs, images, models and tests.
#
#   make deps        install the toolchain, QEMU and the Python package (once)
#   make             kernel + guest programs
#   make qemu        boot the guest with a shell  (CPUS=, RAM= to change; default
#                    one hart per host core, at most 4)
#   make qemu-smol   ... with SmolLM2 at /AI/SMOL         (exports it when missing)
#   make test        lint + the test suite (boots the guest under QEMU; 2 workers)
#   make test-quick  one test per area, a few minutes
#
# Knobs (override on the command line, e.g. `make qemu CPUS=2 RAM=2G`; also
# QEMU=/path, AISVC_QEMU=/path in the environment, CPU=rv64,v=true,vlen=512,
# BOOTARGS=aiworker=console the kernel's command line, docs/AI_SERVICE.md rule 13).
# CPUS left empty boots pyaisvc.guest.qemu's default_cpus() harts (the host's cores, at
# most 4), RAM left empty its DEFAULT_RAM (256M):
CPUS    ?=
RAM     ?=
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
# QEMU: $(AISVC_QEMU) when set (as for pyaisvc), else the one on PATH. CPU: the
# -cpu value; empty lets pyaisvc.guest.qemu choose (RVV on QEMU >= 10), `default` none.
QEMU ?= $(or $(AISVC_QEMU),$(shell command -v qemu-system-riscv64 2>/dev/null))
CPU  ?=

CC      := $(TOOLPREFIX)gcc
LD      := $(TOOLPREFIX)ld
OBJDUMP := $(TOOLPREFIX)objdump
OBJCOPY := $(TOOLPREFIX)objcopy

.PHONY: all toolchain-check qemu-check
all: kernel uprogs

# Set-up first, on every machine: this makefile includes a stamp that the set-up
# script's success writes, so on a fresh clone make runs tools/setup.sh, then
# restarts and finds the toolchain and QEMU it installed (`make qemu-smol` does
# everything). It runs again when the script or the Python dependencies change.
DEPS_STAMP := $(VENV)/.aisvc-deps.mk
$(DEPS_STAMP): tools/setup.sh pyproject.toml
	@bash tools/setup.sh
	@echo "# tools/setup.sh succeeded; make includes this file" > $@
include $(DEPS_STAMP)

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
KERNEL_CORE_SRCS := \
	$(K)/arch/riscv/entry.S \
	$(K)/arch/riscv/start.c \
	$(K)/arch/riscv/machvec.S \
	$(K)/arch/riscv/trampoline.S \
	$(K)/arch/riscv/kernelvec.S \
	$(K)/arch/riscv/swtch.S \
	$(K)/arch/riscv/fpu.S \
	$(K)/arch/riscv/vector.S \
	$(K)/core/main.c \
	$(K)/core/fdt.c \
	$(K)/core/bootargs.c \
	$(K)/core/printf.c \
	$(K)/core/console.c \
	$(K)/core/spinlock.c \
	$(K)/core/sleeplock.c \
	$(K)/core/string.c \
	$(K)/core/kalloc.c \
	$(K)/core/vm.c \
	$(K)/core/proc.c \
	$(K)/core/vector.c \
	$(K)/core/thread.c \
	$(K)/core/trap.c \
	$(K)/core/syscall.c \
	$(K)/core/sysproc.c \
	$(K)/core/exec.c \
	$(K)/core/mmap.c \
	$(K)/drivers/uart.c \
	$(K)/drivers/plic.c \
	$(K)/drivers/virtio_console.c

# [kernel-fs] buffer cache, log, inodes, files, pipes, virtio-blk.
KERNEL_FS_SRCS := \
	$(K)/fs/bio.c \
	$(K)/fs/log.c \
	$(K)/fs/fs.c \
	$(K)/fs/pagecache.c \
	$(K)/fs/file.c \
	$(K)/fs/pipe.c \
	$(K)/fs/sysfile.c \
	$(K)/drivers/virtio_blk.c

# [kernel-ai] the AI service: the request table and its rules, the callers' and
# the worker's calls, their system calls.
KERNEL_AI_SRCS := \
	$(K)/ai/ai_table.c \
	$(K)/ai/ai_request.c \
	$(K)/ai/ai_worker.c \
	$(K)/ai/ai_sched.c \
	$(K)/ai/sched_fifo.c \
	$(K)/ai/sched_priority.c \
	$(K)/ai/sched_shortest.c \
	$(K)/ai/sched_fair.c \
	$(K)/ai/sysai.c

KERNEL_SRCS := $(KERNEL_CORE_SRCS) $(KERNEL_AI_SRCS) $(KERNEL_FS_SRCS)
KERNEL_OBJS := $(patsubst %.c,$(BUILD)/%.o,$(patsubst %.S,$(BUILD)/%.o,$(KERNEL_SRCS)))
KERNEL_ELF  := $(BUILD)/kernel/kernel

# ================================================================ user
# user/ by role: lib (the C library every program links), bin (shell and
# utilities), tests (the kernel's self-tests, the fuzzer and the AI service's test
# and load programs), llm (the LLM runtime and its two programs), ai (the AI
# service's worker, shell tool and gateway). A program NAME is built
# from user/ROLE/NAME.c and lands in the image as /NAME.
# [user-lib] objects linked into every guest program.
ULIB_SRCS := $(U)/lib/ulib.c $(U)/lib/printf.c $(U)/lib/umalloc.c $(U)/lib/thread.c
ULIB_OBJS := $(patsubst %.c,$(BUILD)/%.o,$(ULIB_SRCS))

# [uprogs] one line per guest program, under its role.
BIN_PROGS := \
	init \
	sh \
	cat \
	echo \
	grep \
	kill \
	ln \
	ls \
	mkdir \
	rm \
	sleep \
	uptime \
	wc \
	cksum \
	vmstat \

TEST_PROGS := \
	usertests \
	mmaptests \
	fuzz \
	threadtests \
	aitest \
	aistress \
	aibench \

LLM_PROGS := \
	llmrun_smol \
	llmrun_qwen \

AI_PROGS := \
	ai_daemon \
	ai \
	gateway \

UPROGS := $(BIN_PROGS) $(TEST_PROGS) $(LLM_PROGS) $(AI_PROGS)
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
# [fsimg] the guest's disk: every UPROG as /NAME, built by pyaisvc.image.fsimg.
# FSIMG_EXTRA adds more content (e.g. --add-dir AI/SMOL=models/SMOL);
# FSIMG_SIZE fixes the size; 256M leaves room for usertests' 100+ MB file
# and costs no host disk (the image is sparse). Empty: fit the content.
FSIMG_EXTRA ?=
FSIMG_SIZE  ?= 256M
FSIMG_SRCS  := Makefile pyaisvc/image/fsimg.py pyaisvc/cheader.py pyaisvc/commands/fsimg.py \
	$(K)/include/fs.h $(K)/include/fsparam.h $(K)/include/stat.h
# FSIMG_BUILD writes $@ with every UPROG, sized to fit unless --size follows.
FSIMG_BUILD = $(PYTHON) -m pyaisvc fsimg build --quiet --image $@ \
	$(foreach p,$(UPROGS),--add $(p)=$(BUILD)/user/_$(p))

.PHONY: fsimg
fsimg: $(FSIMG)
$(FSIMG): $(UPROG_ELFS) $(FSIMG_SRCS)
	$(FSIMG_BUILD) $(if $(FSIMG_SIZE),--size $(FSIMG_SIZE)) $(FSIMG_EXTRA)

# [qemu] link rules for the kernel and the guest programs, and booting.
$(KERNEL_ELF): $(KERNEL_OBJS) $(K)/kernel.ld
	$(LD) $(LDFLAGS) -T $(K)/kernel.ld -o $@ $(KERNEL_OBJS)
	$(OBJDUMP) -S $@ > $(BUILD)/kernel/kernel.asm
	$(OBJDUMP) -t $@ | sed '1,/SYMBOL TABLE/d; s/ .* / /; /^$$/d' > $(BUILD)/kernel/kernel.sym

# System-call stubs, generated from the kernel's list (stdlib-only script,
# so plain python3 does without the venv).
$(BUILD)/user/usys.S: $(K)/include/syscall.h tools/gen_usys.py
	@mkdir -p $(dir $@)
	python3 tools/gen_usys.py $< > $@

$(BUILD)/user/usys.o: $(BUILD)/user/usys.S | toolchain-check
	$(CC) $(UCFLAGS) -c -o $@ $<

# Every guest program: crt0 first, then the program's objects, the library,
# the stubs. .PRECIOUS keeps make from deleting the objects as intermediate
# files, so a second `make` has nothing to do.
UPROG_LIBS := $(BUILD)/user/lib/start.o $(ULIB_OBJS) $(BUILD)/user/usys.o
LINK_UPROG = $(LD) $(LDFLAGS) -T $(U)/lib/user.ld -o $@ $(BUILD)/user/lib/start.o \
	$(filter-out $(UPROG_LIBS),$(filter %.o,$^)) $(ULIB_OBJS) $(BUILD)/user/usys.o
.PRECIOUS: $(BUILD)/user/%.o $(BUILD)/tests/%.o
$(addprefix $(BUILD)/user/_,$(BIN_PROGS)): $(BUILD)/user/_%: $(BUILD)/user/bin/%.o $(UPROG_LIBS) $(U)/lib/user.ld
	$(LINK_UPROG)
$(addprefix $(BUILD)/user/_,$(TEST_PROGS)): $(BUILD)/user/_%: $(BUILD)/user/tests/%.o $(UPROG_LIBS) $(U)/lib/user.ld
	$(LINK_UPROG)
# The self-tests share their runner (user/tests/harness.c).
$(BUILD)/user/_usertests $(BUILD)/user/_threadtests $(BUILD)/user/_mmaptests: $(BUILD)/user/tests/harness.o
# aitest and fuzz are each one program in several files, by topic.
$(BUILD)/user/_aitest: $(addprefix $(BUILD)/user/tests/,aitest_common.o aitest_real.o \
	aitest_worker.o aitest_sched.o aitest_resume.o)
$(BUILD)/user/_fuzz: $(addprefix $(BUILD)/user/tests/,fuzz_call.o fuzz_worker.o fuzz_fs.o \
	fuzz_proc.o fuzz_ai.o fuzz_mmap.o)
$(addprefix $(BUILD)/user/_,ai gateway): $(BUILD)/user/_%: $(BUILD)/user/ai/%.o $(UPROG_LIBS) $(U)/lib/user.ld
	$(LINK_UPROG)

# Guest programs used only by the kernel's pytest tests (tests/progs/NAME.c
# -> build/tests/_NAME); the tests pack them into images of their own.
TESTPROGS := fault sbrkbig fpmix fswrite spin tlbprobe vprobe portecho jobzero memhog maptouch
TESTPROG_ELFS := $(addprefix $(BUILD)/tests/_,$(TESTPROGS))
.PHONY: testprogs
testprogs: $(TESTPROG_ELFS)
$(BUILD)/tests/%.o: tests/progs/%.c | toolchain-check
	@mkdir -p $(dir $@)
	$(CC) $(UCFLAGS) -c -o $@ $<
$(BUILD)/tests/_%: $(BUILD)/tests/%.o $(UPROG_LIBS) $(U)/lib/user.ld
	$(LINK_UPROG)

# `make print-UPROGS` prints a variable's value (the tests read lists this way).
print-%:
	@echo $($*)

# pyaisvc/guest/qemu.py builds the QEMU command line for the tests, `pyaisvc run`
# and these targets alike, so there is one place that knows it.
# QEMU_IMAGE / QEMU_RAM are what a target boots (qemu-smol sets its own).
QEMU_IMAGE = $(FSIMG)
QEMU_RAM   = $(RAM)
QEMU_PY    = $(PYTHON) -m pyaisvc.guest.qemu --qemu "$(QEMU)" --kernel $(KERNEL_ELF) \
	--image $(QEMU_IMAGE) $(if $(CPUS),--cpus $(CPUS)) $(if $(QEMU_RAM),--ram $(QEMU_RAM)) $(if $(CPU),--cpu $(CPU)) \
	$(if $(BOOTARGS),--append "$(BOOTARGS)")
GDBPORT := $(shell expr `id -u` % 5000 + 25000)

.PHONY: qemu qemu-gdb
qemu: $(KERNEL_ELF) $(FSIMG) | qemu-check
	$(QEMU_PY)

qemu-gdb: $(KERNEL_ELF) $(FSIMG) | qemu-check
	@echo "*** QEMU waits for gdb on port $(GDBPORT). In another terminal:"
	@echo "***   gdb-multiarch $(KERNEL_ELF) -ex 'target remote localhost:$(GDBPORT)'"
	@echo "*** (Debian: apt-get install gdb-multiarch; riscv64-unknown-elf-gdb works too)"
	$(QEMU_PY) --gdb $(GDBPORT)

# ================================================================ models
# [models]
# smol-assets / qwen-assets: models/SMOL and models/QWEN for the image. If the
# directory is there (INFO.TXT marks a complete one) nothing happens; else a
# models/smol.zip / qwen.zip (v3 or the course's, unchanged) is unpacked; else
# the exporter writes both the directory and the zip.
# Qwen has no default source (no checkpoint ships with the course): give one of
#   QWEN_CHECKPOINT=DIR      a Qwen3.5 HF checkpoint (model_type qwen3_5)
#   QWEN_SYNTHETIC=tiny|0.8b a random Qwen3.5 built from transformers' classes
# or drop the course's qwen.zip into models/.
MODELS          := models
MODEL_FORMAT    ?= v3
QWEN_CHECKPOINT ?=
QWEN_SYNTHETIC  ?=
QWEN_SEED       ?= 0
EXPORT          := $(PYTHON) -m pyaisvc export

.PHONY: smol-assets qwen-assets llm-assets
llm-assets: smol-assets qwen-assets

# $(call present_or_unzip,NAME,DIR): the shell's start of an asset recipe: nothing
# when $(MODELS)/DIR is complete, else $(MODELS)/NAME.zip unpacked when it is there;
# the recipe goes on with `elif` or `else` and the export, then `fi`.
present_or_unzip = if [ -f $(MODELS)/$(2)/INFO.TXT ]; then echo "$(MODELS)/$(2): present"; \
	elif [ -f $(MODELS)/$(1).zip ]; then \
	  echo "unpacking $(MODELS)/$(1).zip"; rm -rf $(MODELS)/$(2); \
	  $(PYTHON) -m zipfile -e $(MODELS)/$(1).zip $(MODELS)/ && \
	  test -f $(MODELS)/$(2)/INFO.TXT || { echo "error: $(MODELS)/$(1).zip holds no $(2)/INFO.TXT"; exit 1; }

smol-assets:
	@$(call present_or_unzip,smol,SMOL); \
	else $(EXPORT) smol --format $(MODEL_FORMAT) --out $(MODELS); fi

qwen-assets:
	@$(call present_or_unzip,qwen,QWEN); \
	elif [ -n "$(QWEN_CHECKPOINT)" ]; then \
	  $(EXPORT) qwen --checkpoint $(QWEN_CHECKPOINT) --format $(MODEL_FORMAT) --out $(MODELS); \
	elif [ -n "$(QWEN_SYNTHETIC)" ]; then \
	  $(EXPORT) qwen --synthetic $(QWEN_SYNTHETIC) --seed $(QWEN_SEED) --format $(MODEL_FORMAT) --out $(MODELS); \
	else \
	  echo "error: no Qwen3.5 model source. Provide one of:"; \
	  echo "  - the course's qwen.zip copied to $(MODELS)/qwen.zip"; \
	  echo "  - make qwen-assets QWEN_CHECKPOINT=DIR   (a Qwen3.5 HF checkpoint directory)"; \
	  echo "  - make qwen-assets QWEN_SYNTHETIC=tiny   (or 0.8b: random weights, real shapes)"; \
	  echo "  - $(EXPORT) qwen --checkpoint DIR | --synthetic tiny|0.8b"; \
	  exit 1; \
	fi

# [llm] the LLM runtime (user/llm/): guest programs, images and QEMU targets
# with the models at /AI/SMOL and /AI/QWEN, the host build of the same C for
# tests/test_llmrun_host.py, and the hot-page check.
# The runtime by role: numeric kernels, layers, asset loading, session,
# sampling, the thread pool, CLI, and one file per model (its descriptor, no main).
# llmrun_NAME links the runtime and model NAME; ai_daemon links the runtime
# and both models.
LLM_RUNTIME := kernels kernels_vec pool profile layers loader kvcache session sample cli
LLM_MODELS  := smol qwen
LLM_SRCS := $(addprefix $(U)/llm/,$(addsuffix .c,$(LLM_RUNTIME)))
LLM_OBJS := $(patsubst %.c,$(BUILD)/%.o,$(LLM_SRCS)) $(BUILD)/user/llm/kernels_rvv.o
LLM_HDRS := $(addprefix $(U)/llm/,$(addsuffix .h,$(LLM_RUNTIME) $(LLM_MODELS)))
HOSTCC   ?= gcc
# A model's default guest RAM is pyaisvc.guest.llmguest.MODELS' (why each is
# what it is, there), asked only when a target boots it.
model_ram = $(shell $(PYTHON) -c 'from pyaisvc.guest.llmguest import MODELS; print(MODELS["$(1)"].ram)')
SMOL_RAM ?= $(call model_ram,smol)
QWEN_RAM ?= $(call model_ram,qwen)

$(BUILD)/user/_llmrun_%: $(BUILD)/user/llm/llmrun_%.o $(BUILD)/user/llm/%.o \
		$(LLM_OBJS) $(UPROG_LIBS) $(U)/lib/user.ld
	$(LINK_UPROG)

AI_DAEMON_OBJS := $(addprefix $(BUILD)/user/llm/,$(addsuffix .o,$(LLM_MODELS))) $(LLM_OBJS)
$(BUILD)/user/_ai_daemon: $(BUILD)/user/ai/ai_daemon.o $(AI_DAEMON_OBJS) $(UPROG_LIBS) $(U)/lib/user.ld
	$(LINK_UPROG)

# Images: every UPROG plus the model directories (exported when missing),
# by the recipe pyaisvc bench/generate/chat use too (pyaisvc.image.modelimage).
# The rules always run: `pyaisvc image` writes nothing when the content hash
# of the programs and model files matches the one stored in $@.hash, so
# replacing models/SMOL with other files (older ones too) rebuilds the image.
$(MODELS)/SMOL/INFO.TXT:
	$(MAKE) smol-assets
$(MODELS)/QWEN/INFO.TXT:
	$(MAKE) qwen-assets

MODEL_IMAGE = $(PYTHON) -m pyaisvc image --quiet --out $@ \
	$(foreach p,$(UPROGS),--add $(p)=$(BUILD)/user/_$(p))
.PHONY: model-image-always
$(BUILD)/fs-smol.img: $(UPROG_ELFS) $(MODELS)/SMOL/INFO.TXT model-image-always
	$(MODEL_IMAGE) --model smol=$(MODELS)/SMOL
$(BUILD)/fs-qwen.img: $(UPROG_ELFS) $(MODELS)/QWEN/INFO.TXT model-image-always
	$(MODEL_IMAGE) --model qwen=$(MODELS)/QWEN
$(BUILD)/fs-llm.img: $(UPROG_ELFS) $(MODELS)/SMOL/INFO.TXT $(MODELS)/QWEN/INFO.TXT model-image-always
	$(MODEL_IMAGE) --model smol=$(MODELS)/SMOL --model qwen=$(MODELS)/QWEN

.PHONY: fsimg-smol fsimg-qwen fsimg-llm qemu-smol qemu-qwen qemu-llm llm-host llm-check-hot
fsimg-smol: $(BUILD)/fs-smol.img
fsimg-qwen: $(BUILD)/fs-qwen.img
fsimg-llm: $(BUILD)/fs-llm.img

# Boot with the model's image and enough RAM for it, through the [qemu]
# section's command. RAM=... given on the command line still wins.
llm_ram = $(if $(filter command line,$(origin RAM)),$(RAM),$(1))
qemu-smol: QEMU_IMAGE = $(BUILD)/fs-smol.img
qemu-smol: QEMU_RAM = $(call llm_ram,$(SMOL_RAM))
qemu-qwen: QEMU_IMAGE = $(BUILD)/fs-qwen.img
qemu-qwen: QEMU_RAM = $(call llm_ram,$(QWEN_RAM))
qemu-llm: QEMU_IMAGE = $(BUILD)/fs-llm.img
qemu-llm: QEMU_RAM = $(call llm_ram,$(QWEN_RAM))
qemu-smol: $(KERNEL_ELF) $(BUILD)/fs-smol.img | qemu-check
	$(QEMU_PY)
qemu-qwen: $(KERNEL_ELF) $(BUILD)/fs-qwen.img | qemu-check
	$(QEMU_PY)
qemu-llm: $(KERNEL_ELF) $(BUILD)/fs-llm.img | qemu-check
	$(QEMU_PY)

# The runtime built natively (host gcc) with tests/host/hostcompat.h standing
# in for user.h. -ffp-contract=off: no fused multiply-add, as in the guest.
LLM_HOST_CFLAGS := -O2 -Wall -Werror -ffp-contract=off -fno-math-errno -I. \
	-include tests/host/hostcompat.h
llm-host: $(BUILD)/host/llmrun_smol $(BUILD)/host/llmrun_qwen $(BUILD)/host/llm_mathcheck \
	$(BUILD)/host/llm_poolstress
$(BUILD)/host/llm_poolstress: tests/host/poolstress.c $(U)/llm/pool.c $(LLM_HDRS) \
		tests/host/hostcompat.h
	@mkdir -p $(dir $@)
	$(HOSTCC) $(LLM_HOST_CFLAGS) -o $@ $< $(U)/llm/pool.c -lpthread
$(BUILD)/host/llm_mathcheck: tests/host/mathcheck.c $(U)/llm/kernels.c $(U)/llm/kernels_vec.c \
		$(LLM_HDRS) tests/host/hostcompat.h
	@mkdir -p $(dir $@)
	$(HOSTCC) $(LLM_HOST_CFLAGS) -o $@ $< $(U)/llm/kernels.c $(U)/llm/kernels_vec.c -lm
$(BUILD)/host/llmrun_%: $(U)/llm/llmrun_%.c $(U)/llm/%.c $(LLM_SRCS) $(LLM_HDRS) tests/host/hostcompat.h
	@mkdir -p $(dir $@)
	$(HOSTCC) $(LLM_HOST_CFLAGS) -o $@ $< $(U)/llm/$*.c $(LLM_SRCS) -lm

# Each hot section's kernels (.text.hot, .text.hot.NAME) must share one 4 KiB page
# (docs/PERF_NOTES.md, fact 4 (hot code in one 4 KiB page)),
# and so must vprobe's probes (what they time would change); tests/host/check_hot.py
# reads the symbol tables with pyelftools.
llm-check-hot: $(BUILD)/user/_llmrun_smol $(BUILD)/user/_llmrun_qwen $(BUILD)/tests/_vprobe
	@for f in $(BUILD)/user/_llmrun_smol $(BUILD)/user/_llmrun_qwen; do $(PYTHON) tests/host/check_hot.py \
		$(BUILD)/user/llm/kernels.o $(BUILD)/user/llm/kernels_rvv.o $(BUILD)/user/llm/kernels_vec.o \
		$(BUILD)/user/llm/layers.o $$f || exit 1; done
	@$(PYTHON) tests/host/check_hot.py $(BUILD)/tests/vprobe.o $(BUILD)/tests/_vprobe

# [bench] measure load time, TTFT and TPOT with tables and plots, chat with the model
# in the guest, or serve it over HTTP (pyaisvc bench / chat / serve; docs/MEASURE.md), e.g.
#   make bench BENCH_ARGS="--model both --assets-qwen build/assets/qwen08/QWEN"
BENCH_ARGS ?=
CHAT_ARGS  ?=
SERVE_ARGS ?=
.PHONY: bench chat serve
bench:
	$(PYTHON) -m pyaisvc bench $(BENCH_ARGS)
chat:
	$(PYTHON) -m pyaisvc chat $(CHAT_ARGS)
serve:
	$(PYTHON) -m pyaisvc serve $(SERVE_ARGS)

# ================================================================ set-up, tests
.PHONY: deps test lint format clean
deps:
	@bash tools/setup.sh

# One style for all C (.clang-format, .editorconfig) and ruff for Python.
# `make format` rewrites the C files in that style.
C_SOURCES = $(shell git ls-files '*.c' '*.h' 2>/dev/null || find kernel user tests -name '*.[ch]')
lint:
	$(VENV)/bin/ruff check pyaisvc tests tools
	@clang-format --dry-run --Werror $(C_SOURCES) || \
	  { echo "lint: C files above are not in the project's style; run 'make format'"; exit 1; }

format:
	clang-format -i $(C_SOURCES)

# The guest tests run the real SmolLM2: export it first (about a minute).
# Everything the tests share under build/ is made here, before pytest starts;
# then TEST_JOBS pytest-xdist workers share the tests out, keeping the tests of a
# module fixture together (each guest test boots its own QEMU on a snapshot
# overlay of its image; tests/conftest.py says how the groups are made).
# TEST_JOBS=0 runs in one process. TEST_ARGS adds pytest options (e.g. -x).
TEST_JOBS ?= 2
TEST_ARGS ?=
PYTEST    := $(PYTHON) -m pytest -q -n $(TEST_JOBS) --dist loadgroup --no-loadscope-reorder $(TEST_ARGS)
TEST_BUILD := all testprogs fsimg llm-host smol-assets
# The builds run two at a time: the C build overlaps SmolLM2's export.
test:
	$(MAKE) --no-print-directory -j2 $(TEST_BUILD) lint
	$(PYTEST)

# test-quick: one test per area (tests/quick.txt), a few minutes.
.PHONY: test-quick
test-quick:
	$(MAKE) --no-print-directory -j2 $(TEST_BUILD)
	$(PYTEST) $(shell grep -v '^\s*\(#\|$$\)' tests/quick.txt)

# The full image fuzzer: one corrupted field at a time, booted (tests/test_fs_fuzz.py).
# CLUSTER=tcp://HOST:8786 runs each image case as a task on that Dask cluster
# (pyaisvc/cluster/fuzz.py; workers as for pyaisvc bench --cluster, docs/MEASURE.md).
.PHONY: fuzz-fs
fuzz-fs: kernel uprogs
ifdef CLUSTER
	$(PYTHON) -m pyaisvc.cluster.fuzz $(CLUSTER) fs
else
	AISVC_FUZZ_FS=1 $(PYTHON) -m pytest -q -m fuzz tests/test_fs_fuzz.py
endif

# The long system-call fuzzer run: 1,000,000 calls on 1 and on 2 harts
# (tests/test_syscall_fuzz.py; user/tests/fuzz.c). CLUSTER=tcp://HOST:8786 runs
# FUZZ_SEEDS seeds (default 1) x both hart counts as tasks on that Dask cluster.
FUZZ_SEEDS ?= 1
.PHONY: fuzz-syscalls
fuzz-syscalls: kernel uprogs
ifdef CLUSTER
	$(PYTHON) -m pyaisvc.cluster.fuzz $(CLUSTER) syscalls --seeds $(FUZZ_SEEDS)
else
	AISVC_FUZZ_SYSCALLS=1 $(PYTHON) -m pytest -q -s -m fuzz tests/test_syscall_fuzz.py
endif

clean:
	rm -rf $(BUILD)
