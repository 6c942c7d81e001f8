//! A failed `start()` step that fails to connect (design §6), with no Python and no process:
//! the `initialize` answer is fed to the `Connection` by hand.

use acp_client::call::{connect_failure, ConnectFailure};
use acp_proto::limits::{Config, TransferLimits};
use acp_proto::reader::Limits;
use acp_proto::{Connection, Event, Outcome, Request};

/// A connection whose agent answered `initialize` with `init` (None: not started).
fn connection(init: Option<&str>) -> Connection {
    let limits = TransferLimits {
        request_bytes: 1 << 20,
        response_bytes: 1 << 20,
        update_bytes: 1 << 20,
        update_count: 1 << 20,
        response_segment_count: 1 << 20,
    };
    let config = Config::new(limits, 7);
    let mut conn = Connection::new(
        config,
        Limits {
            message_bytes: 4096,
        },
    )
    .unwrap();
    let Some(init) = init else {
        return conn;
    };
    conn.request(Request::Initialize).unwrap();
    let line = format!("{init}\n");
    conn.read_buf()[..line.len()].copy_from_slice(line.as_bytes());
    conn.received(line.len());
    let event = conn.poll_event().unwrap();
    assert!(matches!(
        event,
        Some(Event::Done {
            outcome: Ok(Outcome::Initialized),
            ..
        })
    ));
    conn
}

const OFFERS_LOGIN: &str = r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{},"authMethods":[{"id":"login","name":"Log in"},{"id":"key","name":"API key"}]}}"#;

#[test]
fn authentication_required_leaves_the_client_usable_and_names_the_offered_methods() {
    let conn = connection(Some(OFFERS_LOGIN));
    let failure = connect_failure(&conn, "needs auth", false, Some(-32000));
    assert_eq!(
        failure,
        ConnectFailure {
            message: "needs auth (authentication required: the agent offers login, key; call start(new_session=False), authenticate(method_id), then new_session())".into(),
            stop: None,
        }
    );
    // Before initialize was answered nothing is offered.
    let failure = connect_failure(&connection(None), "needs auth", false, Some(-32000));
    assert!(failure.message.contains("the agent offers none offered"));
}

#[test]
fn any_other_failure_to_connect_stops_the_client() {
    let conn = connection(None);
    let failure = connect_failure(&conn, "bad version", false, Some(-32600));
    assert_eq!(failure.message, "bad version");
    assert_eq!(
        failure.stop.as_deref(),
        Some("start() failed (bad version); only close() is accepted (and request_cancel())")
    );
    let failure = connect_failure(&conn, "start() timed out", false, None);
    assert!(failure.stop.is_some());
}

#[test]
fn an_agent_that_exited_fails_as_its_output_ending_does() {
    let failure = connect_failure(&connection(None), "output ended", true, None);
    assert_eq!(
        failure.message,
        "the agent exited during start(): output ended"
    );
}

#[test]
fn a_client_stopped_already_keeps_its_first_reason() {
    let mut conn = connection(None);
    conn.stop("a callback raised".into());
    let failure = connect_failure(&conn, "output ended", false, None);
    assert_eq!(failure.stop, None);
}
