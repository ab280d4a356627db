# crt0 of every guest program: exec() starts it here with a0 = argc and
# a1 = argv; run main(argc, argv), then exit with its return value.

.section .text.start
.global _start
_start:
        call main
        call exit
