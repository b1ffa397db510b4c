//! A constrained greedy decode loop, the shape an engine's sampler takes:
//! build a trie once, then per step fill the mask, mask the logits with the
//! CPU apply kernel, pick a token and accept it. Logits come from a seeded
//! generator instead of a model. Where the trie leaves only one way on, the
//! forced tokens are taken without asking the model (jump-forward).
//!
//! Run: `cargo run --example decode_loop` (meson runs it as a test).
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
use treemask::{ApplyShape, Matcher, Trie, TrieOptions};

const VOCAB: i32 = 151_936;
const EOS: i32 = 151_645;

/// xorshift64*: deterministic stand-in for a model's output.
struct FakeModel(u64);

impl FakeModel {
    fn forward(&mut self, logits: &mut [f32]) {
        for logit in logits {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            *logit = (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40) as f32 / (1 << 24) as f32;
        }
    }
}

fn argmax(logits: &[f32]) -> i32 {
    let mut best = 0;
    for (t, &logit) in logits.iter().enumerate() {
        if logit > logits[best] {
            best = t;
        }
    }
    best as i32
}

fn main() -> Result<(), treemask::Error> {
    // Four "labels" as token paths (a real engine tokenizes label strings).
    let labels: [&[i32]; 4] = [
        &[785, 2906, 12],
        &[785, 2906, 7071],
        &[9707, 1001],
        &[151_000],
    ];
    let trie = Trie::from_paths(&TrieOptions::new(VOCAB, [EOS]), labels)?;
    let mut matcher = Matcher::new(&trie)?;

    let mut model = FakeModel(42);
    let mut row = treemask::allocate_token_bitmask(1, VOCAB);
    let mut logits = vec![0.0f32; VOCAB as usize];
    let shape = ApplyShape::new(1, VOCAB); // one row of VOCAB logits
    let mut forced = Vec::new();
    let (mut steps, mut forward_passes) = (0, 0);
    let mut generated = Vec::new();
    while !matcher.is_terminated() {
        matcher.forced_tokens_into(&mut forced);
        let chosen = match forced.first() {
            Some(&token) => token,
            None => {
                model.forward(&mut logits);
                forward_passes += 1;
                if matcher.fill_next_token_bitmask(&mut row)? {
                    // -inf wherever the row's bit is 0 (AVX2 where the CPU
                    // has it); an engine with half-precision logits calls
                    // apply_token_bitmask_cpu_half with Half::F16 or Bf16.
                    treemask::apply_token_bitmask_cpu(&mut logits, &row, shape, None)?;
                }
                argmax(&logits)
            }
        };
        let accepted = matcher.accept_token(chosen)?;
        assert!(accepted, "masked greedy picked a rejected token {chosen}");
        println!("step {steps}: token {chosen}");
        generated.push(chosen);
        steps += 1;
    }
    let label = matcher.label_ids();
    println!("generated label {label:?} ({generated:?}) in {steps} steps, {forward_passes} forward passes");
    // The sequence must spell exactly one label followed by the stop token.
    let body = &generated[..generated.len() - 1];
    assert_eq!(generated.last(), Some(&EOS));
    assert_eq!(label.len(), 1);
    assert_eq!(labels[label[0] as usize], body);
    Ok(())
}
