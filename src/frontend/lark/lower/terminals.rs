//! The terminal side of the lowering: Lark's UPPER-case terminals (regular by
//! definition) built as regex trees, and where `&`, `~` or laziness need more
//! than a regex, as automata; then written back into the IR as leaves or rules.
//! Also the check that no terminal refers to itself.

use super::*;

impl Lowering<'_> {
    pub(super) fn term_expansions(&mut self, scope: usize, e: &Expansions) -> Result<Rx> {
        let mut alternatives = Vec::with_capacity(e.alternatives.len());
        for alias in &e.alternatives {
            let mut conjuncts = Vec::with_capacity(alias.conjuncts.len());
            for sequence in &alias.conjuncts {
                let mut items = Vec::with_capacity(sequence.items.len());
                for node in &sequence.items {
                    items.push(self.term_expr(scope, node)?);
                }
                conjuncts.push(match items.len() {
                    1 => items.pop().unwrap_or(Rx::Seq(Vec::new())),
                    _ => Rx::Seq(items),
                });
            }
            alternatives.push(match conjuncts.len() {
                1 => conjuncts.pop().unwrap_or(Rx::Seq(Vec::new())),
                _ => Rx::And(conjuncts),
            });
        }
        Ok(match alternatives.len() {
            1 => alternatives.pop().unwrap_or(Rx::Seq(Vec::new())),
            _ => Rx::Alt(alternatives),
        })
    }

    pub(super) fn term_expr(&mut self, scope: usize, node: &ExprNode) -> Result<Rx> {
        let rx = self.term_atom(scope, &node.atom)?;
        Ok(match node.repeat {
            None => rx,
            Some((_, Some(0))) => Rx::Seq(Vec::new()),
            Some((min, max)) => Rx::Repeat {
                rx: Box::new(rx),
                min,
                max,
            },
        })
    }

    pub(super) fn term_atom(&mut self, scope: usize, atom: &Atom) -> Result<Rx> {
        Ok(match atom {
            Atom::Group(e) => self.term_expansions(scope, e)?,
            Atom::Maybe(e) => Rx::Repeat {
                rx: Box::new(self.term_expansions(scope, e)?),
                min: 0,
                max: Some(1),
            },
            Atom::Not(inner) => Rx::Not(Box::new(self.term_atom(scope, inner)?)),
            Atom::Value(v) => self.term_value(scope, v)?,
        })
    }

    pub(super) fn term_value(&mut self, scope: usize, v: &Value) -> Result<Rx> {
        Ok(match v {
            Value::Literal {
                text, insensitive, ..
            } => Rx::Leaf(terminal::literal(text, *insensitive)),
            Value::Range { at, from, to } => {
                Rx::Leaf(terminal::range(from, to).map_err(|e| self.error(*at, e))?)
            }
            Value::Regex { at, pattern, flags } => Rx::Leaf(
                terminal::regex(pattern, flags, &self.options.limits)
                    .map_err(|e| self.error(at + 1 + e.offset, e.message))?,
            ),
            Value::Name { at, name } => match self.term_ref(scope, name) {
                Some(t) => Rx::Term(t),
                None if self.scopes[scope].rules.contains_key(name)
                    || self.scopes[scope].rule_ids.contains_key(name) =>
                {
                    return Err(self.error(
                        *at,
                        format!(
                            "rule `{name}` cannot be used in a terminal (terminals are regular: make it an UPPER-case terminal)"
                        ),
                    ))
                }
                None => return Err(self.error(*at, format!("unknown name: {name:?}"))),
            },
            Value::RegexExt { at, spec } => {
                let chunks = terminal::substring_chunks(spec).map_err(|e| self.error(*at, e))?;
                Rx::Substring(chunks)
            }
            Value::Json { at, .. } => {
                return Err(self.error(*at, "%json literals cannot be used in terminals"))
            }
            Value::NestedLark { at, .. } => {
                return Err(self.error(*at, "nested %lark { ... } cannot be used in terminals"))
            }
            Value::SpecialToken { at, token } => {
                let shown = match token.has_names() {
                    true => token.to_string(),
                    false => "<[...]>".into(),
                };
                return Err(self.error(
                    *at,
                    format!("special tokens (like {shown}) cannot be used in terminals"),
                ));
            }
            Value::GrammarRef { at, name } => {
                return Err(self.error(
                    *at,
                    format!("grammar references (like @{name}) cannot be used in terminals"),
                ))
            }
        })
    }

    // ---- terminals to IR ----

    /// `rx` as IR nodes; `&` and `~` parts become rules built later.
    pub(super) fn rx_to_expr(&mut self, rx: &Rx, at: usize) -> Result<Expr> {
        Ok(match rx {
            Rx::Leaf(hir) => regex::hir_to_expr(hir, &self.options.limits)
                .map_err(|e| self.error(at, e.to_string()))?,
            Rx::Term(t) => Expr::Ref(self.terms[*t].rule),
            Rx::Seq(items) => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    out.push(self.rx_to_expr(item, at)?);
                }
                seq(out)
            }
            Rx::Alt(items) => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    out.push(self.rx_to_expr(item, at)?);
                }
                Expr::Alt(out)
            }
            Rx::Repeat { rx, min, max } => Expr::Repeat {
                expr: Box::new(self.rx_to_expr(rx, at)?),
                min: *min,
                max: *max,
            },
            Rx::Substring(chunks) => self.substring(chunks, at)?,
            Rx::And(_) | Rx::Not(_) => {
                let location = self.map.location(at);
                let name = format!("&~@{}:{}", location.line, location.column);
                let rule = self.push_rule(name, Expr::Empty, at);
                self.pending.push(Pending {
                    rule,
                    rx: rx.clone(),
                    mode: Mode::Automaton,
                    at,
                });
                Expr::Ref(rule)
            }
        })
    }

    /// `chunks[n..m].concat()` for `n <= m`: rules `P_i = "" | chunk_i P_{i+1}`,
    /// one alternative per starting chunk.
    pub(super) fn substring(&mut self, chunks: &[String], at: usize) -> Result<Expr> {
        let limit = self.options.max_substring_chunks;
        if chunks.len() > limit {
            return Err(self.error(
                at,
                format!(
                    "%regex has {} chunks, above the limit of {limit}",
                    chunks.len()
                ),
            ));
        }
        let location = self.map.location(at);
        let base = self.rules.len() as u32;
        let k = chunks.len() as u32;
        for (i, chunk) in chunks.iter().enumerate() {
            let i = i as u32;
            let rest = if i + 1 < k {
                Expr::Seq(vec![
                    Expr::literal(chunk.as_bytes()),
                    Expr::Ref(RuleId(base + i + 1)),
                ])
            } else {
                Expr::literal(chunk.as_bytes())
            };
            self.push_rule(
                format!("%regex@{}:{}#{i}", location.line, location.column),
                Expr::Alt(vec![Expr::Empty, rest]),
                at,
            );
        }
        chains::keep_apart(&mut self.rules, base as usize, RuleId(base));
        let mut alternatives = vec![Expr::Empty];
        alternatives.extend((0..k).map(|i| Expr::Ref(RuleId(base + i))));
        Ok(Expr::Alt(alternatives))
    }

    /// `rx` as one regex; `None` when it has `&` or `~`.
    pub(super) fn rx_to_hir(&mut self, rx: &Rx, at: usize, depth: usize) -> Result<Option<Hir>> {
        if depth > self.options.limits.max_nesting {
            return Err(self.error(
                at,
                format!(
                    "terminals refer to terminals more than {} deep",
                    self.options.limits.max_nesting
                ),
            ));
        }
        Ok(Some(match rx {
            Rx::Leaf(hir) => hir.clone(),
            Rx::Term(t) => {
                if let Some(hir) = &self.terms[*t].hir {
                    return Ok(Some(hir.clone()));
                }
                let Some(inner) = self.terms[*t].rx.clone() else {
                    return Ok(None);
                };
                let Some(hir) = self.rx_to_hir(&inner, self.terms[*t].at, depth + 1)? else {
                    return Ok(None);
                };
                self.terms[*t].hir = Some(hir.clone());
                hir
            }
            Rx::Seq(items) | Rx::Alt(items) => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    match self.rx_to_hir(item, at, depth + 1)? {
                        Some(h) => out.push(h),
                        None => return Ok(None),
                    }
                }
                match rx {
                    Rx::Seq(_) => Hir::concat(out),
                    _ => Hir::alternation(out),
                }
            }
            Rx::Repeat { rx, min, max } => {
                let Some(sub) = self.rx_to_hir(rx, at, depth + 1)? else {
                    return Ok(None);
                };
                Hir::repetition(Repetition {
                    min: *min,
                    max: *max,
                    greedy: true,
                    sub: Box::new(sub),
                })
            }
            Rx::Substring(chunks) => {
                let n = chunks.len();
                if n * (n + 1) / 2 > self.options.max_substring_chunks {
                    return Err(self.map.unsupported(
                        at,
                        format!("`&`, `~` or laziness over a %regex of {n} chunks"),
                    ));
                }
                let mut all = vec![Hir::empty()];
                for start in 0..n {
                    for end in start + 1..=n {
                        all.push(Hir::literal(chunks[start..end].concat().into_bytes()));
                    }
                }
                Hir::alternation(all)
            }
            Rx::And(_) | Rx::Not(_) => return Ok(None),
        }))
    }

    /// `rx` as an automaton.
    pub(super) fn rx_to_dfa(&mut self, rx: &Rx, at: usize) -> Result<Dfa> {
        let max = self.options.max_dfa_states;
        let too_big = |l: &Self, e: String| l.error(at, format!("cannot build this terminal: {e}"));
        match rx {
            Rx::And(items) | Rx::Alt(items) if rx.needs_automaton() => {
                let both = matches!(rx, Rx::And(_));
                let mut acc = self.rx_to_dfa(&items[0], at)?;
                for item in &items[1..] {
                    let next = self.rx_to_dfa(item, at)?;
                    acc = acc.product(&next, both, max).map_err(|e| too_big(self, e))?;
                }
                Ok(acc)
            }
            Rx::Not(inner) => Ok(self.rx_to_dfa(inner, at)?.complement()),
            _ => match self.rx_to_hir(rx, at, 0)? {
                Some(hir) => Dfa::from_hir(&hir, max).map_err(|e| too_big(self, e)),
                None => Err(self.map.unsupported(
                    at,
                    "`&` or `~` inside a concatenation or repetition that is itself under `&`, `~` or laziness",
                )),
            },
        }
    }

    pub(super) fn check_terminal_cycles(&self) -> Result<()> {
        // Iterative depth-first search: 0 unseen, 1 on the stack, 2 done.
        let mut color = vec![0u8; self.terms.len()];
        for root in 0..self.terms.len() {
            if color[root] != 0 {
                continue;
            }
            let mut stack: Vec<(TermId, Vec<TermId>)> = vec![(root, self.children(root))];
            color[root] = 1;
            while let Some((node, children)) = stack.last_mut() {
                match children.pop() {
                    Some(child) if color[child] == 1 => {
                        return Err(self.error(
                            self.terms[child].at,
                            format!(
                                "circular reference in token {:?} definition (terminals are regular: use a lower-case rule to recurse)",
                                self.terms[child].name
                            ),
                        ))
                    }
                    Some(child) if color[child] == 0 => {
                        color[child] = 1;
                        let grandchildren = self.children(child);
                        stack.push((child, grandchildren));
                    }
                    Some(_) => {}
                    None => {
                        color[*node] = 2;
                        stack.pop();
                    }
                }
            }
        }
        Ok(())
    }

    pub(super) fn children(&self, t: TermId) -> Vec<TermId> {
        let mut out = Vec::new();
        if let Some(rx) = &self.terms[t].rx {
            rx.for_each_term(&mut |c| out.push(c));
        }
        out
    }
}
