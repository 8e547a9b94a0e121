/* weights.S - the packed weights (model.weights, runtime/rt_weights.h
 * format) linked into a tfmc build --embed-weights executable as they are:
 * 64-byte aligned in .rodata, with their size, under the names main.c
 * declares (tfmc_weights_image, tfmc_weights_image_size). The same for
 * every model (tfmc's runtime/templates/weights.S); the assembler finds
 * model.weights through -Wa,-I. 64-bit targets (size_t is a .quad). */
  .section .rodata
  .balign 64
  .globl tfmc_weights_image
tfmc_weights_image:
  .incbin "model.weights"
tfmc_weights_image_end:
  .balign 8
  .globl tfmc_weights_image_size
tfmc_weights_image_size:
  .quad tfmc_weights_image_end - tfmc_weights_image
  .section .note.GNU-stack,"",@progbits
