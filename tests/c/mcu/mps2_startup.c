/* tests/c/mcu/mps2_startup.c — the bare-metal start of the test image on
 * QEMU's mps2-an386 (Cortex-M4F): the vector table, a reset handler that
 * turns the FPU on, copies .data and zeroes .bss before main, and the
 * harness's output and exit through semihosting (bkpt 0xab; QEMU runs with
 * -semihosting-config enable=on). Also the cycle counter: SysTick on the
 * processor clock (25 MHz on the MPS2), which under `qemu -icount shift=0`
 * (one instruction = 1 ns of virtual time) advances once per 40
 * instructions. */
#include "mcu_io.h"

#include <stdint.h>

extern uint32_t _data_start, _data_end, _data_load, _bss_start, _bss_end, _stack_top;
int main(void);
void reset_handler(void);

static int semihost(int op, const void *arg) {
  register int r0 __asm__("r0") = op;
  register const void *r1 __asm__("r1") = arg;
  __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
  return r0;
}

void mcu_write(const char *s) { semihost(0x04 /* SYS_WRITE0 */, s); }

void mcu_exit(int status) {
  /* ADP_Stopped_ApplicationExit: QEMU exits 0; anything else: 1 */
  semihost(0x18 /* SYS_EXIT */, (const void *)(uintptr_t)(status == 0 ? 0x20026 : 0x20023));
  for (;;) {
  }
}

#define SYST_CSR (*(volatile uint32_t *)0xE000E010)
#define SYST_RVR (*(volatile uint32_t *)0xE000E014)
#define SYST_CVR (*(volatile uint32_t *)0xE000E018)

void mcu_ticks_start(void) {
  SYST_CSR = 0;
  SYST_RVR = 0xFFFFFF;
  SYST_CVR = 0;
  SYST_CSR = 5; /* enabled, processor clock, no interrupt */
}

uint32_t mcu_ticks(void) { return 0xFFFFFF - (SYST_CVR & 0xFFFFFF); }
int mcu_ticks_available(void) { return 1; }

/* ticks for MCU_CALIBRATE_INSNS instructions: a loop of two (subs, bne) */
uint32_t mcu_calibrate(void) {
  uint32_t n = MCU_CALIBRATE_INSNS / 2;
  mcu_ticks_start();
  __asm__ volatile("1: subs %0, %0, #1\n\tbne 1b" : "+r"(n) : : "cc");
  return mcu_ticks();
}

static void fault(void) {
  mcu_write("fault: the processor trapped\n");
  mcu_exit(3);
}

void reset_handler(void) {
  *(volatile uint32_t *)0xE000ED88 |= 0xFu << 20; /* CPACR: CP10, CP11 full access */
  __asm__ volatile("dsb\n\tisb" ::: "memory");
  for (uint32_t *s = &_data_load, *d = &_data_start; d < &_data_end;) *d++ = *s++;
  for (uint32_t *d = &_bss_start; d < &_bss_end;) *d++ = 0;
  mcu_exit(main());
}

__attribute__((section(".vectors"), used)) static void (*const vectors[16])(void) = {
    (void (*)(void))(uintptr_t)&_stack_top, reset_handler, fault, fault, fault, fault, fault,
    0, 0, 0, 0, fault, fault, 0, fault, fault};
