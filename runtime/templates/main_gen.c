/* main_gen.c - the standalone executable of a generation model (a decoder
 * or an encoder_decoder) compiled by tfmc. The same for every such model
 * (tfmc's runtime/templates/main_gen.c, copied as it is by tfmc emit-c and
 * tfmc build); runtime/rt_main.c's rt_main_generate does the work:
 *   EXE --generate N (--tokens "IDS" | --text "TEXT" --vocab V.txt | --inputs IN)
 *       [--sample ... | --beams K ...] [--outputs OUT.safetensors] ...
 *   EXE --inputs IN.safetensors ...   (without --generate: one forward pass)
 * (EXE --help lists every option). model_config.h says whether the weights
 * are linked in (TFMC_EMBEDDED_WEIGHTS) and whether the model has an encoder
 * (TFMC_ENCODER: tfmc_encode_run). */
#include "model_config.h" /* TFMC_EMBEDDED_WEIGHTS, TFMC_ENCODER */
#include "runtime/rt_gen_model.h"

#include <stddef.h>

/* The compiled programs: the forward pass (tfmc_model_run, what runs
 * without --generate), the decoder step (tfmc_step_run), the encoder
 * (tfmc_encode_run) of an encoder_decoder, and their description. */
extern const RtGenInfo tfmc_gen_info;
void tfmc_model_run(const RtRunArgs *args);
void tfmc_step_run(const RtRunArgs *args);
#if TFMC_ENCODER
void tfmc_encode_run(const RtRunArgs *args);
#define TFMC_ENCODE_RUN tfmc_encode_run
#else
#define TFMC_ENCODE_RUN NULL
#endif

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
  return rt_main_generate(argc, argv, &tfmc_gen_info, tfmc_model_run, tfmc_step_run, TFMC_ENCODE_RUN,
                          TFMC_WEIGHTS_IMAGE, TFMC_WEIGHTS_IMAGE_SIZE);
}
