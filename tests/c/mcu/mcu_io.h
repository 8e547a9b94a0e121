/* tests/c/mcu/mcu_io.h — what the test harness (sort_main.c) needs from its
 * platform: writing text, exiting, and a tick counter. Two implementations:
 * mps2_startup.c (bare metal under QEMU, semihosting) and host_io.c (a
 * hosted OS, write(2): no stdio buffer, so valgrind sees no heap at all). */
#ifndef TFMC_TESTS_MCU_IO_H
#define TFMC_TESTS_MCU_IO_H

#include <stdint.h>

void mcu_write(const char *s);
void mcu_exit(int status);
void mcu_ticks_start(void);
uint32_t mcu_ticks(void); /* since mcu_ticks_start */
int mcu_ticks_available(void);
/* the ticks MCU_CALIBRATE_INSNS instructions take (0 without a counter) */
#define MCU_CALIBRATE_INSNS 2000000
uint32_t mcu_calibrate(void);

#endif
