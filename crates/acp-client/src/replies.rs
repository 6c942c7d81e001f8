//! The reply of each session's running turn, by session id, whatever a binding builds a reply
//! into (the Python binding: a `str` written in place).

/// A few entries at most (one turn per session), looked up once per joined chunk: a short
/// scan comparing ids costs less than hashing one.
pub struct Replies<T>(Vec<(String, T)>);

impl<T> Default for Replies<T> {
    fn default() -> Self {
        Replies(Vec::new())
    }
}

impl<T> Replies<T> {
    #[inline]
    pub fn get_mut(&mut self, session_id: &str) -> Option<&mut T> {
        self.0
            .iter_mut()
            .find(|(id, _)| id == session_id)
            .map(|(_, reply)| reply)
    }

    /// A new turn's reply (replacing the session's earlier one, if any).
    pub fn insert(&mut self, session_id: String, reply: T) {
        self.remove(&session_id);
        self.0.push((session_id, reply));
    }

    pub fn remove(&mut self, session_id: &str) -> Option<T> {
        let index = self.0.iter().position(|(id, _)| id == session_id)?;
        Some(self.0.swap_remove(index).1)
    }
}

#[cfg(test)]
mod tests {
    use super::Replies;

    #[test]
    fn each_session_has_one_reply_found_changed_and_removed_by_its_id() {
        let mut replies = Replies::default();
        replies.insert("a".to_owned(), String::from("1"));
        replies.insert("b".to_owned(), String::from("2"));
        replies.get_mut("a").unwrap().push('x');
        assert_eq!(replies.get_mut("a").map(|r| r.as_str()), Some("1x"));
        // A new turn of a session replaces its earlier reply.
        replies.insert("a".to_owned(), String::from("new"));
        assert_eq!(replies.remove("a").as_deref(), Some("new"));
        assert_eq!(replies.remove("a"), None);
        assert!(replies.get_mut("nope").is_none());
        assert_eq!(replies.remove("b").as_deref(), Some("2"));
    }
}
