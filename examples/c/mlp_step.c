/*
 * One SGD training step of a ReLU MLP (in -> hidden1 -> hidden2 -> classes)
 * with softmax cross-entropy, in float32: numoracle's `mlp_train` op, one step
 * per call. The parameters w1, b1, w2, b2, w3, b3 are read and updated in place;
 * `loss` receives the mean loss of the batch before the update.
 *
 * Planted bug (-DPER_SAMPLE_UPDATE): the parameters are updated after every
 * sample instead of once per batch, so later samples of a batch see weights
 * the earlier ones already moved (the per-sample update of a CUDA MLP whose
 * optimizer ran once per sample instead of once per batch).
 *
 * Build: gcc -O2 -shared -fPIC mlp_step.c -o libmlp_step.so -lm
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int32_t in, h1, h2, c;
} Sizes;

/* z = w a + b for one sample; w is (rows, cols) row-major */
static void affine(const float *w, const float *b, const float *a, float *z,
                   int32_t rows, int32_t cols)
{
    for (int32_t r = 0; r < rows; r++) {
        float s = b[r];
        for (int32_t j = 0; j < cols; j++)
            s += w[r * cols + j] * a[j];
        z[r] = s;
    }
}

static int32_t label_of(const float *row, int32_t c)
{
    int32_t best = 0;
    for (int32_t j = 1; j < c; j++)
        if (row[j] > row[best])
            best = j;
    return best;
}

/*
 * Forward and backward of one sample; adds scale * gradient into the g*
 * buffers and returns the sample's loss.
 */
static float sample_grad(const Sizes *s, const float *x, int32_t label,
                         const float *w1, const float *b1, const float *w2,
                         const float *b2, const float *w3, const float *b3,
                         float *g1, float *gb1, float *g2, float *gb2,
                         float *g3, float *gb3, float scale, float *work)
{
    float *z1 = work, *a1 = z1 + s->h1, *z2 = a1 + s->h1, *a2 = z2 + s->h2;
    float *z3 = a2 + s->h2, *d3 = z3 + s->c, *d2 = d3 + s->c, *d1 = d2 + s->h2;
    affine(w1, b1, x, z1, s->h1, s->in);
    for (int32_t i = 0; i < s->h1; i++)
        a1[i] = z1[i] > 0.0f ? z1[i] : 0.0f;
    affine(w2, b2, a1, z2, s->h2, s->h1);
    for (int32_t i = 0; i < s->h2; i++)
        a2[i] = z2[i] > 0.0f ? z2[i] : 0.0f;
    affine(w3, b3, a2, z3, s->c, s->h2);
    float m = z3[0];
    for (int32_t j = 1; j < s->c; j++)
        m = z3[j] > m ? z3[j] : m;
    float se = 0.0f;
    for (int32_t j = 0; j < s->c; j++)
        se += expf(z3[j] - m);
    float loss = -((z3[label] - m) - logf(se));
    for (int32_t j = 0; j < s->c; j++)
        d3[j] = (expf(z3[j] - m) / se - (j == label ? 1.0f : 0.0f)) * scale;
    for (int32_t r = 0; r < s->c; r++) {
        gb3[r] += d3[r];
        for (int32_t j = 0; j < s->h2; j++)
            g3[r * s->h2 + j] += d3[r] * a2[j];
    }
    for (int32_t j = 0; j < s->h2; j++) {
        float t = 0.0f;
        for (int32_t r = 0; r < s->c; r++)
            t += d3[r] * w3[r * s->h2 + j];
        d2[j] = z2[j] > 0.0f ? t : 0.0f;
    }
    for (int32_t r = 0; r < s->h2; r++) {
        gb2[r] += d2[r];
        for (int32_t j = 0; j < s->h1; j++)
            g2[r * s->h1 + j] += d2[r] * a1[j];
    }
    for (int32_t j = 0; j < s->h1; j++) {
        float t = 0.0f;
        for (int32_t r = 0; r < s->h2; r++)
            t += d2[r] * w2[r * s->h1 + j];
        d1[j] = z1[j] > 0.0f ? t : 0.0f;
    }
    for (int32_t r = 0; r < s->h1; r++) {
        gb1[r] += d1[r];
        for (int32_t j = 0; j < s->in; j++)
            g1[r * s->in + j] += d1[r] * x[j];
    }
    return loss;
}

static void sgd(float *p, float *g, int32_t n, float lr)
{
    for (int32_t i = 0; i < n; i++) {
        p[i] -= lr * g[i];
        g[i] = 0.0f;
    }
}

void mlp_sgd_step(const float *x, const float *labels, float *w1, float *b1, float *w2,
                  float *b2, float *w3, float *b3, float *loss, int32_t batch,
                  int32_t in_features, int32_t hidden1, int32_t hidden2, int32_t classes,
                  float lr)
{
    Sizes s = {in_features, hidden1, hidden2, classes};
    int32_t n1 = hidden1 * in_features, n2 = hidden2 * hidden1, n3 = classes * hidden2;
    size_t grads = (size_t)n1 + hidden1 + n2 + hidden2 + n3 + classes;
    size_t work = 2 * (size_t)hidden1 + 3 * (size_t)hidden2 + 2 * (size_t)classes + hidden1;
    float *buf = calloc(grads + work, sizeof(float));
    float *g1 = buf, *gb1 = g1 + n1, *g2 = gb1 + hidden1, *gb2 = g2 + n2;
    float *g3 = gb2 + hidden2, *gb3 = g3 + n3, *scratch = gb3 + classes;
    float total = 0.0f;
    for (int32_t i = 0; i < batch; i++) {
        int32_t label = label_of(labels + (size_t)i * classes, classes);
        total += sample_grad(&s, x + (size_t)i * in_features, label, w1, b1, w2, b2, w3, b3,
                             g1, gb1, g2, gb2, g3, gb3, 1.0f / (float)batch, scratch);
#ifdef PER_SAMPLE_UPDATE
        sgd(w1, g1, n1, lr); sgd(b1, gb1, hidden1, lr);
        sgd(w2, g2, n2, lr); sgd(b2, gb2, hidden2, lr);
        sgd(w3, g3, n3, lr); sgd(b3, gb3, classes, lr);
#endif
    }
#ifndef PER_SAMPLE_UPDATE
    sgd(w1, g1, n1, lr); sgd(b1, gb1, hidden1, lr);
    sgd(w2, g2, n2, lr); sgd(b2, gb2, hidden2, lr);
    sgd(w3, g3, n3, lr); sgd(b3, gb3, classes, lr);
#endif
    *loss = total / (float)batch;
    free(buf);
}
