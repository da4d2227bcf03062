//! A token trie laid out flat in preorder, so a walk is a loop over an array and
//! skipping a whole subtree (every token with a rejected prefix) is one jump.
//!
//! Node `i` is one byte at depth `depth` (the root is implicit); its subtree is the
//! nodes `i..subtree_end`. The tokens ending at a node are a range of `token_ids`,
//! which holds the trie's tokens in byte order, so the tokens of a subtree are a
//! contiguous range too.
//!
//! Siblings lie a subtree apart in that array, so the root and every node with
//! many children also index them by byte ([`TokenTrie::next_live_child`]): a
//! walk that knows which bytes its state survives jumps over the dead ones,
//! and one that knows which tokens it needs over the children holding none
//! ([`TokenTrie::next_child_where`]), without reading their nodes.

use crate::bits::set_bit;

/// One trie node: a byte at a depth, with its subtree extent and tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrieNode {
    pub byte: u8,
    /// Where the node's children are indexed by byte ([`ChildSlot`]), if it
    /// has many; in the struct's padding (the node stays 24 bytes).
    pub child_slot: ChildSlot,
    /// 1 for a token's first byte.
    pub depth: u32,
    /// One past the last node of this node's subtree.
    pub subtree_end: u32,
    /// Tokens ending here: `token_ids[tokens_start..tokens_end]`.
    pub tokens_start: u32,
    pub tokens_end: u32,
    /// One past the last token (rank) of the subtree: its tokens are
    /// `tokens_start..subtree_tokens_end`, read without the node past it (a
    /// cache miss per visited node in walks asking for a subtree's ranks).
    pub subtree_tokens_end: u32,
}

/// A set of tokens as a flat preorder trie.
#[derive(Debug, Clone, Default)]
pub struct TokenTrie {
    nodes: Vec<TrieNode>,
    /// Per node: the bytes anywhere in its subtree (the node's own included), as a
    /// [`SubtreeBytes`] mask.
    subtree_bytes: Vec<SubtreeBytes>,
    token_ids: Vec<u32>,
    /// Per length `l` up to [`SHORT_TOKEN_LENGTHS`]: the tokens at most `l` bytes
    /// long, as bits by rank (see [`TokenTrie::ranks_up_to_len`]).
    short_ranks: Vec<Vec<u32>>,
    /// Per byte `b`, the tokens holding it, as bits by rank; entry 256: the
    /// tokens holding any non-ASCII byte. A class's members are the tokens none
    /// of whose bytes is outside it: an OR of the outside bytes' sets, not a
    /// pass over every token.
    byte_holders: Vec<Vec<u32>>,
    /// The children of the root and of every node with many, by byte: a walk
    /// finds the next live child here instead of visiting each dead one, a
    /// cache miss apiece (siblings lie a subtree apart in the node array, the
    /// root's across all of it). Entry `ChildSlot::ROOT` is the root's.
    child_indexes: Vec<ChildIndex>,
    /// The indexed children, each parent's in byte order.
    indexed_children: Vec<u32>,
    /// Per indexed child, its first token's rank (its tokens run to the next
    /// sibling's first): a walk asking which children hold a token of a set
    /// reads this array, not the children's nodes, a subtree apart each. (Apart
    /// from the node indices, which lookups by byte read: interleaved, those
    /// cost a Kubernetes key's candidate walks a quarter more.)
    indexed_first_ranks: Vec<u32>,
    max_depth: usize,
}

/// Where a node's children are indexed by byte ([`TokenTrie::next_live_child`]),
/// or [`ChildSlot::NONE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChildSlot(u16);

impl ChildSlot {
    pub const ROOT: ChildSlot = ChildSlot(0);
    pub const NONE: ChildSlot = ChildSlot(u16::MAX);
}

/// One parent's children by byte.
#[derive(Debug, Clone, Copy, Default)]
struct ChildIndex {
    /// Bit `b % 64` of word `b / 64`: a child has byte `b`.
    bytes: [u64; 4],
    /// Where the children start in [`TokenTrie::indexed_children`].
    first: u32,
}

/// Fewest children for a node's to be indexed: with fewer, visiting the dead
/// ones costs little. Llama-3 has 2,531 such nodes, with 35k children in all
/// (380 KB of indexes with the children's first ranks; every node's was 2.5 MB,
/// and the extra memory cost the first masks of a process more than it saved).
const MIN_INDEXED_CHILDREN: usize = 8;

impl TokenTrie {
    /// Builds from token ids already sorted by their bytes (ties in any order).
    pub fn from_sorted<'a>(sorted: Vec<u32>, bytes_of: impl Fn(u32) -> &'a [u8]) -> TokenTrie {
        let mut nodes: Vec<TrieNode> = Vec::new();
        // Node index at each depth of the current path (path[d - 1] has depth d).
        let mut path: Vec<usize> = Vec::new();
        let mut previous: &[u8] = &[];
        for (rank, &id) in sorted.iter().enumerate() {
            let bytes = bytes_of(id);
            let shared = previous
                .iter()
                .zip(bytes)
                .take_while(|(a, b)| a == b)
                .count();
            while path.len() > shared {
                if let Some(done) = path.pop() {
                    nodes[done].subtree_end = nodes.len() as u32;
                }
            }
            for (d, &byte) in bytes.iter().enumerate().skip(path.len()) {
                path.push(nodes.len());
                nodes.push(TrieNode {
                    byte,
                    child_slot: ChildSlot::NONE,
                    depth: d as u32 + 1,
                    subtree_end: 0,
                    tokens_start: rank as u32,
                    tokens_end: rank as u32,
                    subtree_tokens_end: 0,
                });
            }
            if let Some(&last) = path.last() {
                // Duplicates (same bytes, another id) extend the node's range.
                nodes[last].tokens_end = rank as u32 + 1;
            }
            previous = bytes;
        }
        while let Some(done) = path.pop() {
            nodes[done].subtree_end = nodes.len() as u32;
        }
        for i in 0..nodes.len() {
            nodes[i].subtree_tokens_end = nodes
                .get(nodes[i].subtree_end as usize)
                .map_or(sorted.len() as u32, |past| past.tokens_start);
        }
        let max_depth = nodes.iter().map(|n| n.depth as usize).max().unwrap_or(0);
        let subtree_bytes = subtree_bytes(&nodes);
        let short_ranks = short_ranks(&nodes, sorted.len(), max_depth);
        let mut byte_holders = vec![vec![0u32; sorted.len().div_ceil(32)]; 257];
        for (rank, &id) in sorted.iter().enumerate() {
            for &b in bytes_of(id) {
                set_bit(&mut byte_holders[b as usize], rank);
                if b >= 0x80 {
                    set_bit(&mut byte_holders[256], rank);
                }
            }
        }
        let (child_indexes, indexed_children) = index_children(&mut nodes);
        let indexed_first_ranks = indexed_children
            .iter()
            .map(|&child| nodes[child as usize].tokens_start)
            .collect();
        TokenTrie {
            nodes,
            subtree_bytes,
            token_ids: sorted,
            short_ranks,
            byte_holders,
            child_indexes,
            indexed_children,
            indexed_first_ranks,
            max_depth,
        }
    }

    /// The first child (of the parent indexed at `slot`) whose byte is at least
    /// `from` and accepted by `live`, as a node index.
    #[inline]
    pub fn next_live_child(
        &self,
        slot: ChildSlot,
        from: usize,
        live: impl Fn(u8) -> bool,
    ) -> Option<usize> {
        let index = &self.child_indexes[slot.0 as usize];
        let at = self.next_child_at(index, from, |b, _| live(b))?;
        Some(self.indexed_children[at] as usize)
    }

    /// Like [`next_live_child`](Self::next_live_child), past the children
    /// whose tokens (ranks) `wanted` refuses, read from the index alone: the
    /// parent's tokens end at rank `ranks_end`.
    #[inline]
    pub fn next_child_where(
        &self,
        slot: ChildSlot,
        from: usize,
        ranks_end: usize,
        live: impl Fn(u8) -> bool,
        wanted: impl Fn(std::ops::Range<usize>) -> bool,
    ) -> Option<usize> {
        let index = &self.child_indexes[slot.0 as usize];
        let children = index.bytes.iter().map(|w| w.count_ones()).sum::<u32>();
        let last = (index.first + children) as usize;
        let ranks = |at: usize| {
            let end = match at + 1 < last {
                true => self.indexed_first_ranks[at + 1] as usize,
                false => ranks_end,
            };
            self.indexed_first_ranks[at] as usize..end
        };
        let at = self.next_child_at(index, from, |b, at| live(b) && wanted(ranks(at)))?;
        Some(self.indexed_children[at] as usize)
    }

    /// The position in `indexed_children` of the first child of `index` from
    /// byte `from` on that `accept` (byte, position) takes.
    #[inline(always)]
    fn next_child_at(
        &self,
        index: &ChildIndex,
        from: usize,
        accept: impl Fn(u8, usize) -> bool,
    ) -> Option<usize> {
        // The children before byte `b` in the list: the set bits below it.
        let mut before: u32 = index.bytes[..from.min(256) / 64]
            .iter()
            .map(|w| w.count_ones())
            .sum();
        for w in from / 64..4 {
            let word = index.bytes[w];
            let mut rest = if w == from / 64 {
                before += (word & !(u64::MAX << (from % 64))).count_ones();
                word & (u64::MAX << (from % 64))
            } else {
                word
            };
            while rest != 0 {
                let byte = w * 64 + rest.trailing_zeros() as usize;
                let at = (index.first + before) as usize;
                if accept(byte as u8, at) {
                    return Some(at);
                }
                before += 1;
                rest &= rest - 1;
            }
        }
        None
    }

    pub fn nodes(&self) -> &[TrieNode] {
        &self.nodes
    }

    /// All tokens of the trie, in byte order.
    pub fn token_ids(&self) -> &[u32] {
        &self.token_ids
    }

    /// The tokens at most `len` bytes long, as bits by rank (bit `r % 32` of word
    /// `r / 32`): what a counter with `len` bytes left allows among tokens made of
    /// its class. `None` from `SHORT_TOKEN_LENGTHS` up to the longest token.
    #[inline]
    pub fn ranks_up_to_len(&self, len: usize) -> Option<&[u32]> {
        if len >= self.max_depth {
            self.short_ranks.last().map(Vec::as_slice)
        } else {
            // The last entry is every token, not length `len`.
            self.short_ranks[..self.short_ranks.len() - 1]
                .get(len)
                .map(Vec::as_slice)
        }
    }

    /// The longest token's length.
    pub fn max_depth(&self) -> usize {
        self.max_depth
    }

    /// Ranks (positions in [`TokenTrie::token_ids`]) of the tokens in the subtree
    /// of `node`, itself included: a contiguous range.
    #[inline]
    pub fn ranks_under(&self, node: usize) -> std::ops::Range<usize> {
        let node = &self.nodes[node];
        node.tokens_start as usize..node.subtree_tokens_end as usize
    }

    /// The node whose path is `bytes`, if some token starts with them.
    pub fn node_of(&self, bytes: &[u8]) -> Option<usize> {
        bytes
            .iter()
            .try_fold(None, |parent, &b| self.child_of(parent, b).map(Some))
            .flatten()
    }

    /// The child with byte `b` of `parent` (`None`: the root), if some token
    /// starts with its path.
    #[inline]
    pub fn child_of(&self, parent: Option<usize>, b: u8) -> Option<usize> {
        match parent {
            None => self.child(ChildSlot::ROOT, 0..self.nodes.len(), b),
            Some(node) => {
                let n = &self.nodes[node];
                self.child(n.child_slot, node + 1..n.subtree_end as usize, b)
            }
        }
    }

    /// The child with byte `b` of the parent whose children are the nodes
    /// `children` (in preorder) and indexed at `slot`: looked up there, else
    /// found sibling by sibling.
    #[inline]
    fn child(&self, slot: ChildSlot, children: std::ops::Range<usize>, b: u8) -> Option<usize> {
        if slot != ChildSlot::NONE {
            let index = &self.child_indexes[slot.0 as usize];
            let (word, bit) = (b as usize / 64, b % 64);
            if index.bytes[word] & (1 << bit) == 0 {
                return None;
            }
            let before: u32 = index.bytes[..word]
                .iter()
                .map(|w| w.count_ones())
                .sum::<u32>()
                + (index.bytes[word] & ((1 << bit) - 1)).count_ones();
            return Some(self.indexed_children[(index.first + before) as usize] as usize);
        }
        let mut child = children.start;
        while child < children.end && self.nodes[child].byte != b {
            child = self.nodes[child].subtree_end as usize;
        }
        (child < children.end).then_some(child)
    }

    /// Tokens ending exactly at `node`.
    #[inline]
    pub fn tokens_at(&self, node: usize) -> &[u32] {
        let n = &self.nodes[node];
        &self.token_ids[n.tokens_start as usize..n.tokens_end as usize]
    }

    /// Tokens anywhere in the subtree of `node` (itself included).
    #[inline]
    pub fn tokens_under(&self, node: usize) -> &[u32] {
        &self.token_ids[self.ranks_under(node)]
    }

    /// The token with the longest byte string that is a prefix of `bytes`, and that
    /// length (the lowest id among tokens with the same bytes).
    pub fn longest_prefix(&self, bytes: &[u8]) -> Option<(u32, usize)> {
        let mut best = None;
        let (mut slot, mut first, mut end) = (ChildSlot::ROOT, 0, self.nodes.len());
        for (depth, &byte) in bytes.iter().enumerate() {
            let Some(i) = self.child(slot, first..end, byte) else {
                break;
            };
            if let Some(&id) = self.tokens_at(i).iter().min() {
                best = Some((id, depth + 1));
            }
            let node = &self.nodes[i];
            (slot, first, end) = (node.child_slot, i + 1, node.subtree_end as usize);
        }
        best
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The tokens holding byte `b`, as bits by rank.
    #[inline]
    pub fn holders(&self, b: u8) -> &[u32] {
        &self.byte_holders[b as usize]
    }

    /// The tokens holding a non-ASCII byte, as bits by rank.
    #[inline]
    pub fn non_ascii_holders(&self) -> &[u32] {
        &self.byte_holders[256]
    }

    /// The bytes `node`'s children start with (what a token may read right after
    /// its path).
    pub fn child_bytes(&self, node: usize) -> SubtreeBytes {
        let mut bytes = SubtreeBytes::default();
        let mut child = node + 1;
        while child < self.nodes[node].subtree_end as usize {
            bytes.0 |= SubtreeBytes::of_byte(self.nodes[child].byte).0;
            child = self.nodes[child].subtree_end as usize;
        }
        bytes
    }

    /// The bytes anywhere in the subtree of `node`.
    #[inline]
    pub fn subtree_bytes(&self, node: usize) -> SubtreeBytes {
        self.subtree_bytes[node]
    }

    /// Heap bytes held.
    pub fn memory_usage(&self) -> usize {
        self.nodes.len() * (std::mem::size_of::<TrieNode>() + std::mem::size_of::<SubtreeBytes>())
            + self.token_ids.len() * (4 + std::mem::size_of::<u128>())
            + self.short_ranks.iter().map(|l| l.len() * 4).sum::<usize>()
            + self.child_indexes.len() * std::mem::size_of::<ChildIndex>()
            + (self.indexed_children.len() + self.indexed_first_ranks.len()) * 4
            + self.byte_holders.iter().map(|h| h.len() * 4).sum::<usize>()
    }
}

/// Lengths [`TokenTrie::ranks_up_to_len`] answers for (2 MB for Llama-3's 128k
/// tokens, whose longest is 128 bytes): counters longer than that are walked.
pub const SHORT_TOKEN_LENGTHS: usize = 128;

/// Per length up to [`SHORT_TOKEN_LENGTHS`] (and the longest token's, when it is
/// within): the tokens at most that long, as bits by rank; then every token.
fn short_ranks(nodes: &[TrieNode], tokens: usize, max_depth: usize) -> Vec<Vec<u32>> {
    let lengths = max_depth.min(SHORT_TOKEN_LENGTHS) + 1;
    let ranks = nodes.iter().flat_map(|node| {
        (node.tokens_start..node.tokens_end).map(|rank| (node.depth as usize, rank as usize))
    });
    let mut by_len = up_to_len(ranks, tokens, lengths);
    let mut every = vec![u32::MAX; tokens.div_ceil(32)];
    if !tokens.is_multiple_of(32) {
        every[tokens / 32] = (1u32 << (tokens % 32)) - 1;
    }
    by_len.push(every);
    by_len
}

/// Per length below `lengths`, the bits (of `bits`) whose length is at most it,
/// from `(length, bit)` pairs.
pub(super) fn up_to_len(
    items: impl Iterator<Item = (usize, usize)>,
    bits: usize,
    lengths: usize,
) -> Vec<Vec<u32>> {
    let mut by_len = vec![vec![0u32; bits.div_ceil(32)]; lengths];
    for (len, bit) in items.filter(|&(len, _)| len < lengths) {
        set_bit(&mut by_len[len], bit);
    }
    for l in 1..lengths {
        let (shorter, this) = by_len.split_at_mut(l);
        for (w, s) in this[0].iter_mut().zip(&shorter[l - 1]) {
            *w |= s;
        }
    }
    by_len
}

/// A set of bytes, exact for ASCII below DEL (bit `b` of the 128); DEL and every
/// byte from 0x80 share bit 127, so a set without bit 127 holds only those ASCII
/// bytes. What a walk needs to know of a subtree: "are all its bytes in this class".
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SubtreeBytes(pub u128);

impl SubtreeBytes {
    #[inline]
    pub fn of_byte(b: u8) -> SubtreeBytes {
        SubtreeBytes(1u128 << b.min(127))
    }

    /// Every byte here is in `class`.
    #[inline]
    pub fn within(self, class: SubtreeBytes) -> bool {
        self.0 & !class.0 == 0
    }
}

/// The root's children, and those of the nodes with at least
/// [`MIN_INDEXED_CHILDREN`] (the most-branching first where the slots run out),
/// indexed by byte; each such node's slot set.
fn index_children(nodes: &mut [TrieNode]) -> (Vec<ChildIndex>, Vec<u32>) {
    let children_of = |nodes: &[TrieNode], range: std::ops::Range<usize>| {
        let mut children = Vec::new();
        let mut child = range.start;
        while child < range.end {
            children.push(child as u32);
            child = nodes[child].subtree_end as usize;
        }
        children
    };
    let mut parents: Vec<(usize, usize)> = (0..nodes.len())
        .map(|i| {
            (
                i,
                children_of(nodes, i + 1..nodes[i].subtree_end as usize).len(),
            )
        })
        .filter(|&(_, count)| count >= MIN_INDEXED_CHILDREN)
        .collect();
    let slots = ChildSlot::NONE.0 as usize - 1;
    if parents.len() > slots {
        parents.sort_unstable_by_key(|&(i, count)| (std::cmp::Reverse(count), i));
        parents.truncate(slots);
        parents.sort_unstable();
    }
    let mut indexes = Vec::with_capacity(parents.len() + 1);
    let mut indexed = Vec::new();
    let mut add = |children: Vec<u32>, nodes: &[TrieNode]| {
        let mut index = ChildIndex {
            bytes: [0; 4],
            first: indexed.len() as u32,
        };
        for &child in &children {
            let b = nodes[child as usize].byte as usize;
            index.bytes[b / 64] |= 1 << (b % 64);
        }
        indexed.extend(children);
        indexes.push(index);
    };
    add(children_of(nodes, 0..nodes.len()), nodes);
    for (slot, &(i, _)) in parents.iter().enumerate() {
        add(
            children_of(nodes, i + 1..nodes[i].subtree_end as usize),
            nodes,
        );
        nodes[i].child_slot = ChildSlot(slot as u16 + 1);
    }
    (indexes, indexed)
}

/// Per node, the union of the bytes of its subtree: children first (reverse
/// preorder), each child's set joined into its parent's.
fn subtree_bytes(nodes: &[TrieNode]) -> Vec<SubtreeBytes> {
    let mut out = vec![SubtreeBytes::default(); nodes.len()];
    for i in (0..nodes.len()).rev() {
        let mut set = SubtreeBytes::of_byte(nodes[i].byte).0;
        let mut child = i + 1;
        while child < nodes[i].subtree_end as usize {
            set |= out[child].0;
            child = nodes[child].subtree_end as usize;
        }
        out[i] = SubtreeBytes(set);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preorder_layout_with_subtrees_and_duplicates() {
        let words: Vec<&[u8]> = vec![b"ab", b"a", b"abc", b"b", b"ab"];
        let mut sorted: Vec<u32> = (0..words.len() as u32).collect();
        sorted.sort_by(|&x, &y| words[x as usize].cmp(words[y as usize]).then(x.cmp(&y)));
        let trie = TokenTrie::from_sorted(sorted, |id| words[id as usize]);
        let shape: Vec<(u8, u32, u32)> = trie
            .nodes()
            .iter()
            .map(|n| (n.byte, n.depth, n.subtree_end))
            .collect();
        assert_eq!(
            shape,
            vec![(b'a', 1, 3), (b'b', 2, 3), (b'c', 3, 3), (b'b', 1, 4)]
        );
        assert_eq!(trie.tokens_at(0), &[1]);
        assert_eq!(trie.tokens_at(1), &[0, 4], "duplicates share a node");
        assert_eq!(trie.tokens_under(0), &[1, 0, 4, 2]);
        assert_eq!(trie.tokens_under(3), &[3]);
        assert_eq!(trie.longest_prefix(b"abd"), Some((0, 2)));
        assert_eq!(trie.longest_prefix(b"abcx"), Some((2, 3)));
        assert_eq!(trie.longest_prefix(b"ba"), Some((3, 1)));
        assert_eq!(trie.longest_prefix(b"c"), None);
        assert_eq!(trie.longest_prefix(b""), None);
        let ab = SubtreeBytes(SubtreeBytes::of_byte(b'a').0 | SubtreeBytes::of_byte(b'b').0);
        assert_eq!(
            trie.subtree_bytes(0).0,
            ab.0 | SubtreeBytes::of_byte(b'c').0
        );
        assert!(trie.subtree_bytes(3).within(ab));
        assert!(!trie.subtree_bytes(1).within(ab), "c is below ab");
        // The tokens holding each byte, by rank: "a" "ab" "ab" "abc" "b".
        assert_eq!(trie.holders(b'a'), &[0b01111]);
        assert_eq!(trie.holders(b'b'), &[0b11110]);
        assert_eq!(trie.holders(b'c'), &[0b01000]);
        assert!((0x80..=0xFF).all(|b| trie.holders(b) == [0]));
        assert_eq!(trie.non_ascii_holders(), &[0]);
        // Ranks by node without the node past the subtree.
        assert_eq!(trie.ranks_under(0), 0..4);
        assert_eq!(trie.ranks_under(2), 3..4);
        assert_eq!(trie.ranks_under(3), 4..5);
    }

    /// The next live child is found among an indexed parent's children by byte,
    /// not node by node; bytes without a node are never answered. The root is
    /// always indexed, a node from [`MIN_INDEXED_CHILDREN`] children on.
    #[test]
    fn next_live_child_skips_dead_and_missing_bytes() {
        let mut words: Vec<Vec<u8>> = vec![b"a".to_vec(), b"ab".to_vec(), b"c".to_vec()];
        words.extend([b"x".to_vec(), b"xy".to_vec(), b"\xff".to_vec()]);
        // `q` has children `0`, `2`, `4`, ... (eight of them), `c` only one.
        words.extend((0..MIN_INDEXED_CHILDREN as u8).map(|i| vec![b'q', b'0' + 2 * i]));
        words.push(b"cd".to_vec());
        words.sort();
        let trie =
            TokenTrie::from_sorted((0..words.len() as u32).collect(), |id| &words[id as usize]);
        let node = |path: &[u8]| trie.node_of(path);
        let root = ChildSlot::ROOT;
        let all = |_: u8| true;
        let after = |b: u8| b as usize + 1;
        assert_eq!(trie.next_live_child(root, 0, all), node(b"a"));
        assert_eq!(trie.next_live_child(root, after(b'a'), all), node(b"c"));
        let not_c = |b: u8| b != b'c';
        assert_eq!(trie.next_live_child(root, after(b'a'), not_c), node(b"q"));
        let only_b = |b: u8| b == b'b';
        assert_eq!(trie.next_live_child(root, 0, only_b), None, "no node");
        assert_eq!(trie.next_live_child(root, after(b'x'), all), node(b"\xff"));
        assert_eq!(trie.next_live_child(root, 256, all), None);
        let q = trie.nodes()[node(b"q").unwrap()].child_slot;
        assert_ne!(q, ChildSlot::NONE);
        let c = node(b"c").unwrap();
        assert_eq!(trie.nodes()[c].child_slot, ChildSlot::NONE, "one child");
        assert_eq!(trie.next_live_child(q, 0, all), node(b"q0"));
        assert_eq!(trie.next_live_child(q, after(b'0'), all), node(b"q2"));
        assert_eq!(trie.next_live_child(q, b'3' as usize, all), node(b"q4"));
        // Lookups by path go through the index too.
        let q4 = trie
            .nodes()
            .iter()
            .position(|n| n.depth == 2 && n.byte == b'4');
        assert!(q4.is_some_and(|i| trie
            .tokens_at(i)
            .iter()
            .all(|&t| words[t as usize] == b"q4")));
        assert_eq!(node(b"q4"), q4);
        assert_eq!(node(b"q3"), None);
        let q4_id = words.iter().position(|w| w == b"q4").map(|id| id as u32);
        assert_eq!(trie.longest_prefix(b"q4z"), q4_id.map(|id| (id, 2)));
        let past_lt = |b: u8| b > b'<';
        assert_eq!(trie.next_live_child(q, 0, past_lt), node(b"q>"));
        assert_eq!(trie.next_live_child(q, after(b'>'), all), None);
    }

    /// Children are skipped by their tokens (ranks) as well as their byte, the
    /// last child's tokens ending at the parent's.
    #[test]
    fn next_child_where_asks_for_each_live_childs_ranks() {
        let mut words: Vec<Vec<u8>> = (0..MIN_INDEXED_CHILDREN as u8)
            .flat_map(|i| [vec![b'a' + i], vec![b'a' + i, b'!']])
            .collect();
        words.sort();
        let trie =
            TokenTrie::from_sorted((0..words.len() as u32).collect(), |id| &words[id as usize]);
        let end = trie.token_ids().len();
        let all = |_: u8| true;
        // Each child holds two tokens: the ranks 2k..2k + 2.
        let holds = |rank: usize| move |ranks: std::ops::Range<usize>| ranks.contains(&rank);
        let root = ChildSlot::ROOT;
        for (k, b) in (b'a'..b'a' + MIN_INDEXED_CHILDREN as u8).enumerate() {
            let found = trie.next_child_where(root, 0, end, all, holds(2 * k + 1));
            assert_eq!(
                found,
                trie.node_of(&[b]),
                "the child holding rank {}",
                2 * k + 1
            );
            assert_eq!(trie.ranks_under(found.unwrap()), 2 * k..2 * k + 2);
        }
        let from_c = b'c' as usize;
        assert_eq!(
            trie.next_child_where(root, from_c, end, all, holds(1)),
            None
        );
        let not_d = |b: u8| b != b'd';
        assert_eq!(trie.next_child_where(root, 0, end, not_d, holds(6)), None);
        // The last child's tokens run to the parent's end (past it: none).
        assert_eq!(
            trie.next_child_where(root, 0, end, all, holds(end - 1)),
            trie.node_of(b"h")
        );
        assert_eq!(
            trie.next_child_where(root, 0, end - 1, all, holds(end - 1)),
            None
        );
    }

    /// The child slot lives in the node's padding: nodes are what walks read.
    #[test]
    fn trie_nodes_stay_24_bytes() {
        assert_eq!(std::mem::size_of::<TrieNode>(), 24);
    }
}
