//! DFA minimisation (Hopcroft's partition refinement).
//!
//! `regex-automata`'s DFAs report matches a byte late and keep apart states that
//! continue alike; minimised, a string body is one state looping on every
//! character, which the token tables read in one OR, and equivalent positions
//! share one token table.

use super::{State, DEAD};

/// Merges equivalent states (Hopcroft's partition refinement over blocks), keeping
/// [`DEAD`] = 0 and numbering the others by their first state.
///
/// `regex-automata` DFAs are not minimal for this matcher's semantics: a state
/// reached by a completed match and the same position reached otherwise differ
/// there (its matches are reported one byte late), and alternatives that end in
/// different NFA states but continue alike stay apart. Merged, the string body of
/// `(char | escape)*` is one state that loops on every character (which the token
/// tables take in one OR), and equivalent positions share one token table.
pub(super) fn minimize(
    stride: usize,
    transitions: &[State],
    matching: &[bool],
    start: State,
) -> (Vec<State>, Vec<bool>, State) {
    let n = matching.len();
    // Predecessors by (target, class), as one array with offsets.
    let mut offsets = vec![0u32; n * stride + 1];
    for (i, &to) in transitions.iter().enumerate() {
        offsets[to as usize * stride + i % stride + 1] += 1;
    }
    for i in 1..offsets.len() {
        offsets[i] += offsets[i - 1];
    }
    let mut sources = vec![0u32; transitions.len()];
    let mut fill = offsets.clone();
    for (i, &to) in transitions.iter().enumerate() {
        let key = to as usize * stride + i % stride;
        sources[fill[key] as usize] = (i / stride) as u32;
        fill[key] += 1;
    }

    // Blocks are ranges of `elems`; `marked` counts the marked states moved to the
    // front of their block.
    struct Block {
        start: u32,
        end: u32,
        marked: u32,
        in_work: bool,
    }
    let mut elems: Vec<u32> = (0..n as u32).collect();
    elems.sort_by_key(|&q| matching[q as usize]);
    let split_at = elems.partition_point(|&q| !matching[q as usize]) as u32;
    let mut blocks: Vec<Block> = Vec::new();
    let mut block_of = vec![0u32; n];
    for (lo, hi) in [(0, split_at), (split_at, n as u32)] {
        if lo < hi {
            for &q in &elems[lo as usize..hi as usize] {
                block_of[q as usize] = blocks.len() as u32;
            }
            blocks.push(Block {
                start: lo,
                end: hi,
                marked: 0,
                in_work: true,
            });
        }
    }
    let mut location = vec![0u32; n];
    for (i, &q) in elems.iter().enumerate() {
        location[q as usize] = i as u32;
    }
    let mut work: Vec<u32> = (0..blocks.len() as u32).collect();
    let mut splitter: Vec<u32> = Vec::new();
    let mut touched: Vec<u32> = Vec::new();
    while let Some(b) = work.pop() {
        blocks[b as usize].in_work = false;
        splitter.clear();
        let block = &blocks[b as usize];
        splitter.extend_from_slice(&elems[block.start as usize..block.end as usize]);
        for class in 0..stride {
            touched.clear();
            for &q in &splitter {
                let key = q as usize * stride + class;
                for &p in &sources[offsets[key] as usize..offsets[key + 1] as usize] {
                    let y = block_of[p as usize] as usize;
                    let block = &mut blocks[y];
                    let at = location[p as usize];
                    if at < block.start + block.marked {
                        continue; // already marked
                    }
                    if block.marked == 0 {
                        touched.push(y as u32);
                    }
                    let swap_at = block.start + block.marked;
                    let other = elems[swap_at as usize];
                    elems.swap(at as usize, swap_at as usize);
                    location[other as usize] = at;
                    location[p as usize] = swap_at;
                    block.marked += 1;
                }
            }
            for &y in &touched {
                let (start, end, marked, in_work) = {
                    let block = &mut blocks[y as usize];
                    let info = (block.start, block.end, block.marked, block.in_work);
                    block.marked = 0;
                    info
                };
                if marked == end - start {
                    continue;
                }
                // Split: the marked front becomes a new block.
                let new = blocks.len() as u32;
                blocks[y as usize].start = start + marked;
                blocks.push(Block {
                    start,
                    end: start + marked,
                    marked: 0,
                    in_work: false,
                });
                for &q in &elems[start as usize..(start + marked) as usize] {
                    block_of[q as usize] = new;
                }
                let rest = end - start - marked;
                let pick = if in_work || marked <= rest { new } else { y };
                if in_work {
                    blocks[new as usize].in_work = true;
                    work.push(new);
                } else {
                    blocks[pick as usize].in_work = true;
                    work.push(pick);
                }
            }
        }
    }

    // Renumber: DEAD's block is 0, the others by their first state.
    let mut number = vec![u32::MAX; blocks.len()];
    let mut count = 0u32;
    for &b in &block_of {
        let b = b as usize;
        if number[b] == u32::MAX {
            number[b] = count;
            count += 1;
        }
    }
    debug_assert_eq!(number[block_of[DEAD as usize] as usize], DEAD);
    let states = count as usize;
    let mut out = vec![DEAD; states * stride];
    let mut out_matching = vec![false; states];
    for q in 0..n {
        let new = number[block_of[q] as usize] as usize;
        out_matching[new] = matching[q];
        for c in 0..stride {
            out[new * stride + c] = number[block_of[transitions[q * stride + c] as usize] as usize];
        }
    }
    (out, out_matching, number[block_of[start as usize] as usize])
}
