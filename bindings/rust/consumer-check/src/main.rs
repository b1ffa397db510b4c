// Builds a trie and prints its node count: proof that libtreemask loaded.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
fn main() {
    let options = treemask::TrieOptions::new(10, [0]);
    let trie = treemask::Trie::from_paths(&options, [[1, 2]]).expect("build");
    println!("nodes {}", trie.stats().expect("stats").n_nodes);
}
