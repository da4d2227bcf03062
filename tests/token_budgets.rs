//! Token budgets ([`TokenBudget`](stencil::grammar::TokenBudget)): Lark's
//! `max_tokens=` on a rule and a structural tag's `any_text.max_tokens`, over
//! a small vocabulary where every split of the text is a token.
//!
//! What must hold: a lexeme ends once it has spent its budget (a token counts
//! when it carries a byte of the lexeme, straddling ones included), so after
//! the spending token only what follows the lexeme is allowed; a token that
//! ends the lexeme on its own is allowed as before; a rollback gives the
//! budget back; and at every step the mask is exactly the set of tokens the
//! matcher consumes (the budget never makes the mask lie).

use std::sync::Arc;

use stencil::bits::has_bit;
use stencil::matcher::TokenMatcher;
use stencil::tables::TokenTables;
use stencil::vocab::Vocabulary;
use stencil::Compiler;

const TOKENS: &[&str] = &[
    "<", ">", "a", "b", "ab", "b>", "<a", "<ab>", "</x>", "</", "x>",
];
const EOS: u32 = 11;

fn vocab() -> Arc<Vocabulary> {
    let mut tokens: Vec<Vec<u8>> = TOKENS.iter().map(|t| t.as_bytes().to_vec()).collect();
    tokens.push(Vec::new());
    Arc::new(Vocabulary::from_token_bytes(
        tokens,
        vec![(EOS, "<eos>".into())],
        vec![EOS],
    ))
}

fn id(token: &str) -> u32 {
    TOKENS.iter().position(|t| *t == token).unwrap() as u32
}

fn lark(grammar: &str) -> Arc<TokenTables> {
    Compiler::new(vocab())
        .compile_lark(grammar)
        .unwrap_or_else(|e| panic!("{grammar}: {e}"))
}

/// The tokens the mask allows now, checked against consuming each in turn.
fn allowed(m: &mut TokenMatcher) -> Vec<&'static str> {
    let mut mask = vec![0u32; m.tables().mask_words()];
    m.fill_next_token_bitmask(&mut mask);
    let mut out = Vec::new();
    for (i, token) in TOKENS.iter().enumerate() {
        let in_mask = has_bit(&mask, i);
        assert_eq!(in_mask, m.is_token_allowed(i as u32), "token {token:?}");
        if in_mask {
            out.push(*token);
        }
    }
    out
}

fn after(tables: &Arc<TokenTables>, tokens: &[&str]) -> TokenMatcher {
    let mut m = TokenMatcher::new(Arc::clone(tables));
    for t in tokens {
        m.consume_token(id(t))
            .unwrap_or_else(|e| panic!("{tokens:?}: {t:?}: {e}"));
    }
    m
}

#[test]
fn a_lexeme_ends_once_it_has_spent_its_budget() {
    let tables = lark("start: \"<\" x \">\"\nx[max_tokens=2]: /[ab]*/");
    // One token spent: the lexeme goes on.
    assert_eq!(
        allowed(&mut after(&tables, &["<", "a"])),
        [">", "a", "b", "ab", "b>"]
    );
    // Two: it has ended, only the close may follow.
    assert_eq!(allowed(&mut after(&tables, &["<", "a", "b"])), [">"]);
    assert_eq!(allowed(&mut after(&tables, &["<", "ab", "ab"])), [">"]);
    // A token that straddles the lexeme's start counts.
    assert_eq!(allowed(&mut after(&tables, &["<a", "b"])), [">"]);
    // The second token may end the lexeme itself.
    let mut m = after(&tables, &["<", "a", "b>"]);
    assert!(m.is_accepting());
    assert!(allowed(&mut m).is_empty());
    // A rollback gives the token back.
    let mut m = after(&tables, &["<", "a", "b"]);
    m.rollback(1);
    assert_eq!(allowed(&mut m), [">", "a", "b", "ab", "b>"]);
    // A lexeme the budget never reaches is the body alone.
    assert!(after(&tables, &["<ab>"]).is_accepting());
}

#[test]
fn a_budget_of_one_cuts_after_the_first_token() {
    let tables = lark("start: \"<\" x \">\"\nx[max_tokens=1]: /[ab]*/");
    assert_eq!(allowed(&mut after(&tables, &["<", "ab"])), [">"]);
    // The opening token carried a byte of it: spent already.
    assert_eq!(allowed(&mut after(&tables, &["<a"])), [">"]);
    // Nothing of it read yet: nothing spent.
    assert_eq!(
        allowed(&mut after(&tables, &["<"])),
        [">", "a", "b", "ab", "b>"]
    );
}

#[test]
fn the_cut_may_leave_a_prefix_of_the_body() {
    // `x` needs a `b` to match, but two tokens of `a` end it anyway.
    let tables = lark("start: \"<\" x \">\"\nx[max_tokens=2]: /a+b/");
    let mut m = after(&tables, &["<", "a", "a"]);
    assert_eq!(allowed(&mut m), [">"]);
    m.consume_token(id(">")).unwrap();
    assert!(m.is_accepting());
}

#[test]
fn any_text_stops_at_its_budget_and_the_end_follows() {
    let compiler = Compiler::new(vocab());
    let tag = serde_json::json!({"type": "structural_tag", "format": {
        "type": "tag", "begin": "<", "end": "</x>",
        "content": {"type": "any_text", "max_tokens": 2}}});
    let tables = compiler
        .compile_structural_tag(&tag, &Default::default())
        .unwrap();
    // One content token: any text goes on (every token here keeps it going or
    // ends it).
    assert_eq!(allowed(&mut after(&tables, &["<", "a"])), TOKENS);
    // Two content tokens: only the end may follow, from its first byte.
    assert_eq!(
        allowed(&mut after(&tables, &["<", "a", "b"])),
        ["<", "</x>", "</"]
    );
    let mut m = after(&tables, &["<", "a", "b", "</", "x>"]);
    assert!(m.is_accepting());
    assert!(allowed(&mut m).is_empty());
}
