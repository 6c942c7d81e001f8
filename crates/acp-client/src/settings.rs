//! Plain option values checked once, with the messages every binding shares: a call's
//! timeout, the cancel grace, `drain`'s timeout, the host's directories and environment, and
//! why the agent could not be spawned. (Reading them from the binding's objects is the
//! binding's job; what they must be is here.)

use std::ffi::{OsStr, OsString};
use std::io;
use std::time::Duration;

use acp_proto::error::AcpError;

/// A call's timeout in seconds: None, or a positive finite number.
pub fn timeout(seconds: Option<f64>, name: &str) -> Result<Option<Duration>, String> {
    match seconds {
        None => Ok(None),
        Some(s) if s > 0.0 && s.is_finite() => Ok(Some(Duration::from_secs_f64(s))),
        Some(s) => Err(format!(
            "{name} must be a positive number of seconds (got {s})"
        )),
    }
}

/// `drain`'s timeout: a finite number of seconds, zero or more.
pub fn drain_timeout(seconds: f64) -> Result<Duration, String> {
    if !(seconds >= 0.0 && seconds.is_finite()) {
        return Err(format!(
            "timeout must be a number of seconds >= 0 (got {seconds})"
        ));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// The grace a cancelled turn gets, in whole milliseconds (rounded up).
pub fn cancel_grace_ms(seconds: f64) -> Result<u64, AcpError> {
    if !(seconds > 0.0 && seconds.is_finite()) {
        return Err(AcpError::InvalidLimits(format!(
            "cancel_grace must be a positive number of seconds (got {seconds})"
        )));
    }
    Ok((seconds * 1000.0).ceil() as u64)
}

/// The additional directories as (given, realpath) pairs; a facade that did not give the
/// given forms (or not one per realpath) gives the realpaths for both.
pub fn paired_directories(given: Vec<String>, realpaths: Vec<String>) -> Vec<(String, String)> {
    let given = if given.len() == realpaths.len() {
        given
    } else {
        realpaths.clone()
    };
    given.into_iter().zip(realpaths).collect()
}

/// The terminals' base environment: the client's `env`, else this process's.
pub fn host_env(env: Option<Vec<(String, String)>>) -> Vec<(OsString, OsString)> {
    match env {
        Some(pairs) => pairs
            .into_iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect(),
        None => std::env::vars_os().collect(),
    }
}

/// Why the agent could not be spawned (in `cwd`, when one was given). io::Error's text ends in
/// " (os error N)", which is cut: the binding's OSError shows the errno itself.
pub fn spawn_failure(error: &io::Error, cwd: Option<&OsStr>) -> String {
    let text = error.to_string();
    let text = text.split(" (os error").next().unwrap_or(&text);
    match cwd {
        Some(dir) => format!("could not start the agent in {dir:?}: {text}"),
        None => format!("could not start the agent: {text}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timeout_is_none_or_positive_and_finite() {
        assert_eq!(timeout(None, "timeout"), Ok(None));
        assert_eq!(
            timeout(Some(1.5), "timeout"),
            Ok(Some(Duration::from_millis(1500)))
        );
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let error = timeout(Some(bad), "timeout").unwrap_err();
            assert!(error.starts_with("timeout must be a positive number of seconds (got "));
        }
    }

    #[test]
    fn a_drain_may_take_no_time_but_not_a_negative_or_endless_one() {
        assert_eq!(drain_timeout(0.0), Ok(Duration::ZERO));
        assert_eq!(drain_timeout(2.0), Ok(Duration::from_secs(2)));
        for bad in [-0.5, f64::NAN, f64::INFINITY] {
            assert!(drain_timeout(bad).unwrap_err().contains(">= 0"));
        }
    }

    #[test]
    fn the_cancel_grace_rounds_up_to_a_millisecond_and_must_be_positive() {
        assert_eq!(cancel_grace_ms(0.0001).unwrap(), 1);
        assert_eq!(cancel_grace_ms(2.0).unwrap(), 2000);
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(matches!(
                cancel_grace_ms(bad),
                Err(AcpError::InvalidLimits(text)) if text.starts_with("cancel_grace must be")
            ));
        }
    }

    #[test]
    fn directories_pair_their_given_forms_or_fall_back_to_the_realpaths() {
        let real = vec!["/r/a".to_owned(), "/r/b".to_owned()];
        let given = vec!["a".to_owned(), "b".to_owned()];
        assert_eq!(
            paired_directories(given, real.clone()),
            [("a".into(), "/r/a".into()), ("b".into(), "/r/b".into())]
        );
        assert_eq!(
            paired_directories(vec!["a".into()], real),
            [
                ("/r/a".into(), "/r/a".into()),
                ("/r/b".into(), "/r/b".into())
            ]
        );
    }

    #[test]
    fn the_host_env_is_the_clients_or_this_processs() {
        let env = host_env(Some(vec![("K".into(), "v".into())]));
        assert_eq!(env, [(OsString::from("K"), OsString::from("v"))]);
        assert_eq!(host_env(None).len(), std::env::vars_os().count());
    }

    #[test]
    fn a_spawn_failure_says_where_without_the_os_error_suffix() {
        let error = io::Error::from_raw_os_error(2);
        let text = spawn_failure(&error, Some(OsStr::new("/nowhere")));
        assert!(text.starts_with("could not start the agent in \"/nowhere\": "));
        assert!(!text.contains("os error"));
        assert!(spawn_failure(&error, None).starts_with("could not start the agent: "));
    }
}
