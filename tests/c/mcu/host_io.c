/* tests/c/mcu/host_io.c — mcu_io.h on a hosted OS: text through write(2)
 * (no stdio, so no buffer on the heap), no tick counter. */
#define _POSIX_C_SOURCE 200809L
#include "mcu_io.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void mcu_write(const char *s) {
  size_t n = strlen(s);
  while (n > 0) {
    ssize_t w = write(1, s, n);
    if (w <= 0) return;
    s += w;
    n -= (size_t)w;
  }
}

void mcu_exit(int status) { exit(status); }
void mcu_ticks_start(void) {}
uint32_t mcu_ticks(void) { return 0; }
int mcu_ticks_available(void) { return 0; }
uint32_t mcu_calibrate(void) { return 0; }
