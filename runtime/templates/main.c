/* main.c - the standalone executable of a model compiled by tfmc. The same
 * for every model (tfmc's runtime/templates/main.c, copied as it is by
 * tfmc emit-c and tfmc build); runtime/rt_main.c does the work: arguments,
 * checks, weights, threads, inputs and outputs (EXE --help lists them).
 *   EXE --inputs IN.safetensors --outputs OUT.safetensors [--threads N]
 *       [--weights FILE]   (default: EXE.weights next to the executable)
 * model_config.h says whether the weights are linked into the executable
 * instead (TFMC_EMBEDDED_WEIGHTS: tfmc_weights_image from weights.c or
 * weights.S). */
#include "model_config.h" /* TFMC_EMBEDDED_WEIGHTS */
#include "runtime/rt_model.h"

#include <stddef.h>

/* The compiled model: model.c (tfmc emit-c), or the object file and info.c
 * of tfmc build. */
extern const RtModelInfo tfmc_model_info;
void tfmc_model_run(const RtRunArgs *args);

#if TFMC_EMBEDDED_WEIGHTS
extern const unsigned char tfmc_weights_image[];
extern const size_t tfmc_weights_image_size;
#define TFMC_WEIGHTS_IMAGE tfmc_weights_image
#define TFMC_WEIGHTS_IMAGE_SIZE tfmc_weights_image_size
#else
#define TFMC_WEIGHTS_IMAGE NULL
#define TFMC_WEIGHTS_IMAGE_SIZE 0
#endif

int main(int argc, char **argv) {
  return rt_main(argc, argv, &tfmc_model_info, tfmc_model_run, TFMC_WEIGHTS_IMAGE,
                 TFMC_WEIGHTS_IMAGE_SIZE);
}
