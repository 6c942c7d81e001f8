//! Title patterns: a Python `re` pattern (its source and flags) compiled for the `regex` crate,
//! whose search time is linear in the title's length (no backtracking). Python's syntax is kept
//! where the crate has it; what the crate cannot evaluate in linear time (look-around,
//! backreferences, conditionals, atomic groups, possessive quantifiers) is refused when the
//! policy is compiled, with the reason. Differences that remain: `\w`, `\s` and `\b` follow
//! Unicode's definitions rather than `str.isalnum()`/`str.isspace()`;
//! in verbose mode whitespace inside a class is ignored too; a `{` that does not start a
//! quantifier must be escaped; octal escapes are not accepted.

use std::fmt;

/// A pattern looks at no more than this many bytes of a title. Real titles are a line or a
/// command (the interop transcripts' longest is under 100 bytes; a shell heredoc may run to a
/// few KiB). The search is linear but its constant is the pattern's: measured in release, the
/// heaviest patterns accepted (`\w{200}x`, `(?i)[\w\s]{0,100}z`, whose Unicode classes defeat
/// the lazy DFA's cache) take 270-430 ms on 64 KiB and 60-70 ms on these 16 KiB, and
/// ordinary patterns microseconds. A longer title is not searched: deny patterns count it as
/// matched and allow patterns as not (`rules::first_match`).
pub const TITLE_BYTES: usize = 16 * 1024;

/// The compiled program may take this much memory (the crate's default); a pattern
/// needing more, such as `(a{1000}){1000}`, is refused.
const PROGRAM_BYTES: usize = 10 << 20;

// Python's `re` flag bits.
const IGNORECASE: u32 = 2;
const LOCALE: u32 = 4;
const MULTILINE: u32 = 8;
const DOTALL: u32 = 16;
const UNICODE: u32 = 32;
const VERBOSE: u32 = 64;
const DEBUG: u32 = 128;
const ASCII: u32 = 256;

/// A compiled title pattern, equal to another with the same source and flags.
#[derive(Clone)]
pub struct TitlePattern {
    source: String,
    flags: u32,
    regex: regex::Regex,
}

impl fmt::Debug for TitlePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TitlePattern({:?}, flags={})", self.source, self.flags)
    }
}

impl PartialEq for TitlePattern {
    fn eq(&self, other: &TitlePattern) -> bool {
        self.source == other.source && self.flags == other.flags
    }
}

impl Eq for TitlePattern {}

impl TitlePattern {
    /// Compiles Python `re` source with its flags (`re.Pattern.pattern`, `.flags`). The error
    /// says why the pattern cannot be used.
    pub fn compile(source: &str, flags: u32) -> Result<TitlePattern, String> {
        let unsupported = flags & !(IGNORECASE | MULTILINE | DOTALL | UNICODE | VERBOSE);
        if unsupported != 0 {
            let mut names: Vec<String> = [
                (LOCALE, "re.LOCALE"),
                (DEBUG, "re.DEBUG"),
                (ASCII, "re.ASCII"),
            ]
            .iter()
            .filter(|(bit, _)| unsupported & bit != 0)
            .map(|(_, name)| (*name).to_owned())
            .collect();
            let other = unsupported & !(LOCALE | DEBUG | ASCII);
            if other != 0 {
                names.push(format!("flag value {other}"));
            }
            return Err(format!(
                "{} is not supported (title patterns are Unicode; write [0-9A-Za-z_] for an ASCII \\w)",
                names.join(", ")
            ));
        }
        let translated = translate(source, flags & VERBOSE != 0)?;
        let regex = regex::RegexBuilder::new(&translated)
            .case_insensitive(flags & IGNORECASE != 0)
            .multi_line(flags & MULTILINE != 0)
            .dot_matches_new_line(flags & DOTALL != 0)
            .ignore_whitespace(flags & VERBOSE != 0)
            .unicode(true)
            .size_limit(PROGRAM_BYTES)
            .build()
            .map_err(|error| explain(&error))?;
        Ok(TitlePattern {
            source: source.to_owned(),
            flags,
            regex,
        })
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether the pattern is found in `title` (`re.Pattern.search`); `None` when the title is
    /// longer than `TITLE_BYTES` and so not searched.
    pub fn search(&self, title: &str) -> Option<bool> {
        if title.len() > TITLE_BYTES {
            return None;
        }
        Some(self.regex.is_match(title))
    }
}

/// The crate's error in one line: its last line names the problem ("look-around, including
/// look-ahead and look-behind, is not supported"), the lines above draw the pattern.
fn explain(error: &regex::Error) -> String {
    match error {
        regex::Error::Syntax(text) => {
            let last = text
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or(text);
            let reason = last.trim().trim_start_matches("error: ");
            format!("{reason} (title patterns run on a linear-time engine, without look-around, backreferences, conditionals or atomic groups)")
        }
        regex::Error::CompiledTooBig(limit) => {
            format!("it compiles to more than {limit} bytes; write a smaller pattern")
        }
        other => other.to_string(),
    }
}

/// Python syntax the crate reads differently, rewritten to mean what Python means:
/// - `\Z` (end of text) is the crate's `\z`;
/// - `$` outside a class also matches before a final newline, as Python's does;
/// - inside a class, `[` is a literal in Python (the crate nests classes) and `&&`, `--`, `~~`
///   are literals in Python (set operations in the crate), so `[`, `&`, `~` are escaped.
///
/// A possessive quantifier (`a*+`, Python 3.11) is refused here: the crate would read it as a
/// repeated repetition and match where Python does not. Everything else is passed as written;
/// the crate refuses what it does not know.
fn translate(source: &str, verbose: bool) -> Result<String, String> {
    let mut out = String::with_capacity(source.len() + 8);
    let mut chars = source.chars().peekable();
    let mut in_class = false;
    // Inside a class: whether the next character is the first (a `]` there is a literal).
    let mut class_start = false;
    // Outside a class: the previous character was a quantifier (`*`, `+`, `?`, `}`).
    let mut after_quantifier = false;
    let mut previous = '\0';
    while let Some(c) = chars.next() {
        if in_class {
            let first = std::mem::replace(&mut class_start, false);
            match c {
                '\\' => {
                    out.push('\\');
                    if let Some(next) = chars.next() {
                        out.push(next);
                    }
                }
                '^' if first => {
                    out.push('^');
                    class_start = true; // `[^]...]`: the `]` is still a literal
                }
                ']' if first => out.push_str("\\]"),
                ']' => {
                    out.push(']');
                    in_class = false;
                }
                '[' | '&' | '~' => {
                    out.push('\\');
                    out.push(c);
                }
                _ => out.push(c),
            }
            continue;
        }
        if c == '+' && after_quantifier {
            return Err(
                "possessive quantifiers (*+, ++, ?+, {m,n}+) are not supported (title patterns run on a linear-time engine, without look-around, backreferences, conditionals or atomic groups)".into(),
            );
        }
        after_quantifier = matches!(c, '*' | '+' | '}') || (c == '?' && previous != '(');
        previous = c;
        match c {
            '\\' => match chars.next() {
                Some('Z') => out.push_str("\\z"),
                Some(next) => {
                    out.push('\\');
                    out.push(next);
                }
                None => out.push('\\'),
            },
            '[' => {
                out.push('[');
                in_class = true;
                class_start = true;
            }
            '$' => out.push_str("(?:$|\\n\\z)"),
            '#' if verbose => {
                // A comment to the end of the line: copied as written, never translated.
                out.push('#');
                for next in chars.by_ref() {
                    out.push(next);
                    if next == '\n' {
                        break;
                    }
                }
            }
            _ => out.push(c),
        }
        if c == '\\' {
            previous = '\0'; // an escaped character is no quantifier and no group
            after_quantifier = false;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(source: &str, flags: u32, title: &str) -> bool {
        TitlePattern::compile(source, flags)
            .unwrap()
            .search(title)
            .unwrap()
    }

    #[test]
    fn python_semantics_that_differ_in_the_crate_are_rewritten() {
        assert!(found(r"ls$", 0, "ls\n")); // `$` before a final newline
        assert!(!found(r"ls$", 0, "ls\nx"));
        assert!(found(r"ls\Z", 0, "ls"));
        assert!(!found(r"ls\Z", 0, "ls\n"));
        assert!(found(r"[[]", 0, "a[b")); // `[` in a class is a literal
        assert!(found(r"[a&&b]", 0, "&")); // `&&` is two literals
        assert!(found(r"[]a]", 0, "]"));
        assert!(found(r"[^]a]", 0, "b"));
        assert!(!found(r"[^]a]", 0, "]"));
        assert!(found(r"\$5", 0, "costs $5"));
        assert!(found("a # a comment with $ and [\n b", VERBOSE, "ab"));
        assert!(found(r"(?P<w>run) \w+", IGNORECASE, "RUN ls"));
        assert!(found(r"^x", MULTILINE, "a\nx"));
        assert!(found(r"a.b", DOTALL, "a\nb"));
    }

    #[test]
    fn backtracking_constructs_are_refused_with_the_reason() {
        for source in [
            r"(?<=a)b",
            r"(?=a)",
            r"(a)\1",
            r"(?P<x>a)(?P=x)",
            r"(?>a)",
            r"a*+",
        ] {
            let error = TitlePattern::compile(source, 0).unwrap_err();
            assert!(error.contains("linear-time"), "{source}: {error}");
        }
        assert!(TitlePattern::compile("a", ASCII)
            .unwrap_err()
            .contains("re.ASCII"));
        assert!(TitlePattern::compile("(a{1000}){1000}", 0)
            .unwrap_err()
            .contains("bytes"));
    }

    #[test]
    fn a_catastrophic_pattern_is_linear_and_long_titles_are_not_searched() {
        let pattern = TitlePattern::compile(r"^(a+)+$", 0).unwrap();
        let title = "a".repeat(TITLE_BYTES - 1) + "!";
        let started = std::time::Instant::now();
        assert_eq!(pattern.search(&title), Some(false));
        // Generous: a backtracking engine takes longer than the age of the universe here.
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        assert_eq!(pattern.search(&"a".repeat(TITLE_BYTES + 1)), None);
    }
}
