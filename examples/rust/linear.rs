//! linear (y = x W^T + b) and its three gradients in Rust, as a C-ABI cdylib
//! with no external crates. Row-major f32 arrays; `bias` and `grad_bias` are
//! null for a layer without a bias.
//!
//! Build:  rustc --edition 2021 --crate-type cdylib -C opt-level=2 linear.rs -o liblinear.so
//!
//! Planted bug (`--cfg planted_bug`): grad_bias sums the batch from the second
//! sample on, so every batch of one passes.

use std::slice;

#[no_mangle]
pub unsafe extern "C" fn linear_f32(
    x: *const f32, weight: *const f32, bias: *const f32, grad_output: *const f32,
    y: *mut f32, grad_input: *mut f32, grad_weight: *mut f32, grad_bias: *mut f32,
    batch: i32, in_features: i32, out_features: i32,
) {
    let (b, i, o) = (batch as usize, in_features as usize, out_features as usize);
    let x = slice::from_raw_parts(x, b * i);
    let w = slice::from_raw_parts(weight, o * i);
    let g = slice::from_raw_parts(grad_output, b * o);
    let y = slice::from_raw_parts_mut(y, b * o);
    let gi = slice::from_raw_parts_mut(grad_input, b * i);
    let gw = slice::from_raw_parts_mut(grad_weight, o * i);
    for s in 0..b {
        for r in 0..o {
            let mut acc = 0.0f32;
            for c in 0..i {
                acc += x[s * i + c] * w[r * i + c];
            }
            if !bias.is_null() {
                acc += *bias.add(r);
            }
            y[s * o + r] = acc;
        }
        for c in 0..i {
            let mut acc = 0.0f32;
            for r in 0..o {
                acc += g[s * o + r] * w[r * i + c];
            }
            gi[s * i + c] = acc;
        }
    }
    for r in 0..o {
        for c in 0..i {
            let mut acc = 0.0f32;
            for s in 0..b {
                acc += g[s * o + r] * x[s * i + c];
            }
            gw[r * i + c] = acc;
        }
    }
    if !grad_bias.is_null() {
        let gb = slice::from_raw_parts_mut(grad_bias, o);
        let first = if cfg!(planted_bug) { 1 } else { 0 };
        for r in 0..o {
            let mut acc = 0.0f32;
            for s in first.min(b - 1)..b {
                acc += g[s * o + r];
            }
            gb[r] = acc;
        }
    }
}
