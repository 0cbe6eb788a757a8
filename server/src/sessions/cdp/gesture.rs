//! What is down in each of a client's tabs (a mouse button, a finger),
//! so that input is judged where it acts whatever the command calls it:
//! a button going up away from where it went down (a drag's drop, a
//! page's `mouseup`) and a finger going down through a `touchMove` (a
//! point whose id no finger down has: Chromium presses it) are judged as
//! clicks there, as the live view and `run_task` judge a button going up.
//! A plain click (down and up at one point, nothing moved between) is
//! judged once, at its press. Noted only for what reached the browser: a
//! refused press leaves nothing down.

use std::collections::HashMap;

use super::Act;

/// A finger down: its id, where it went down, where it is.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Finger {
    id: i64,
    start: (f64, f64),
    last: (f64, f64),
}

/// What is down per CDP session (tab) of one connection.
#[derive(Debug, Default)]
pub(super) struct Gestures {
    /// Where a button went down, while nothing moved it since.
    pressed: HashMap<String, (f64, f64)>,
    fingers: HashMap<String, Finger>,
}

/// A decision the gestures make of a command.
#[derive(Debug, PartialEq)]
pub(super) enum Judged {
    /// Judge it (or not) as this act.
    As(Act),
    /// Refused: one finger lifts away from where it went down as another
    /// goes down, two acts in one command.
    TwoAtOnce,
}

impl Gestures {
    /// What `act` (of CDP session `session`) is, given what is down.
    pub(super) fn judge(&self, session: &str, act: Act) -> Judged {
        match act {
            Act::Release { x, y } if self.pressed.get(session) == Some(&(x, y)) => {
                Judged::As(Act::Motion)
            }
            Act::Touch {
                id,
                x,
                y,
                cancel,
                start,
            } => {
                let down = self.fingers.get(session);
                let moved = down.is_some_and(|f| f.last != f.start);
                match (id, down) {
                    _ if cancel => Judged::As(Act::Motion),
                    // The touch ends: the finger lifts where it is.
                    (None, Some(f)) if moved => Judged::As(Act::Release {
                        x: f.last.0,
                        y: f.last.1,
                    }),
                    (None, _) => Judged::As(Act::Motion),
                    (Some(id), Some(f)) if f.id == id && !start => Judged::As(Act::Motion),
                    (Some(id), Some(f)) if f.id != id && moved => Judged::TwoAtOnce,
                    // A finger going down (another lifting where it went
                    // down: a tap there, judged as it went down).
                    (Some(_), _) => Judged::As(Act::Press { x, y }),
                }
            }
            other => Judged::As(other),
        }
    }

    /// Notes a command that reached the browser: `act` as
    /// [`rules::decide`](super::decide) made it, before [`judge`](Self::judge).
    pub(super) fn sent(
        &mut self,
        session: &str,
        method: &str,
        params: &serde_json::Value,
        act: &Act,
    ) {
        let point = || params["x"].as_f64().zip(params["y"].as_f64());
        match (method, act) {
            (
                "Input.dispatchMouseEvent" | "Input.emulateTouchFromMouseEvent",
                Act::Press { x, y },
            ) => {
                self.pressed.insert(session.to_owned(), (*x, *y));
            }
            (
                "Input.dispatchMouseEvent" | "Input.emulateTouchFromMouseEvent",
                Act::Release { .. },
            ) => {
                self.pressed.remove(session);
            }
            // A move elsewhere (or anything but a move in place) and the
            // button's up is no longer where it went down.
            ("Input.dispatchMouseEvent" | "Input.emulateTouchFromMouseEvent", _)
                if point() != self.pressed.get(session).copied() =>
            {
                self.pressed.remove(session);
            }
            (
                _,
                Act::Touch {
                    id: Some(id),
                    x,
                    y,
                    cancel: false,
                    ..
                },
            ) => {
                let at = (*x, *y);
                let f = self.fingers.entry(session.to_owned()).or_insert(Finger {
                    id: *id,
                    start: at,
                    last: at,
                });
                if f.id == *id {
                    f.last = at;
                } else {
                    *f = Finger {
                        id: *id,
                        start: at,
                        last: at,
                    };
                }
            }
            (_, Act::Touch { .. }) => {
                self.fingers.remove(session);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sessions::cdp::{Context, Verdict, decide};
    use serde_json::{Value, json};

    /// Runs `commands` through the rules and the gestures as the engine
    /// does (every one reaching the browser), answering what each was
    /// judged as.
    fn run(commands: &[(&str, Value)]) -> Vec<Judged> {
        let mut g = Gestures::default();
        commands
            .iter()
            .map(|(m, p)| {
                let Verdict::Act(act) = decide(m, p, &Context::default()) else {
                    panic!("{m} {p}: not an act");
                };
                let judged = g.judge("S", act.clone());
                g.sent("S", m, p, &act);
                judged
            })
            .collect()
    }

    fn mouse(kind: &str, x: f64, y: f64) -> (&'static str, Value) {
        (
            "Input.dispatchMouseEvent",
            json!({ "type": kind, "x": x, "y": y, "button": "left", "clickCount": 1 }),
        )
    }

    fn touch(kind: &str, points: Value) -> (&'static str, Value) {
        (
            "Input.dispatchTouchEvent",
            json!({ "type": kind, "touchPoints": points }),
        )
    }

    #[test]
    fn a_click_is_judged_once_and_a_drags_drop_where_it_lands() {
        // Move, press, release in place: the release is motion.
        let got = run(&[
            mouse("mouseMoved", 5.0, 5.0),
            mouse("mousePressed", 5.0, 5.0),
            mouse("mouseReleased", 5.0, 5.0),
        ]);
        assert_eq!(got[2], Judged::As(Act::Motion));
        // Press, move away, release: the drop is judged where it lands.
        let got = run(&[
            mouse("mousePressed", 5.0, 5.0),
            mouse("mouseMoved", 300.0, 40.0),
            mouse("mouseReleased", 300.0, 40.0),
        ]);
        assert_eq!(got[2], Judged::As(Act::Release { x: 300.0, y: 40.0 }));
        // Moved away and back: still judged (the page saw the drag).
        let got = run(&[
            mouse("mousePressed", 5.0, 5.0),
            mouse("mouseMoved", 300.0, 40.0),
            mouse("mouseMoved", 5.0, 5.0),
            mouse("mouseReleased", 5.0, 5.0),
        ]);
        assert_eq!(got[3], Judged::As(Act::Release { x: 5.0, y: 5.0 }));
        // A release with no press before it (a page's `mouseup`).
        let got = run(&[mouse("mouseReleased", 9.0, 9.0)]);
        assert_eq!(got[0], Judged::As(Act::Release { x: 9.0, y: 9.0 }));
        // Released elsewhere with no move between.
        let got = run(&[
            mouse("mousePressed", 5.0, 5.0),
            mouse("mouseReleased", 6.0, 5.0),
        ]);
        assert_eq!(got[1], Judged::As(Act::Release { x: 6.0, y: 5.0 }));
        // A touch from the mouse is the same.
        let got = run(&[
            (
                "Input.emulateTouchFromMouseEvent",
                json!({"type": "mousePressed", "x": 1, "y": 1, "button": "left"}),
            ),
            (
                "Input.emulateTouchFromMouseEvent",
                json!({"type": "mouseMoved", "x": 80, "y": 1, "button": "left"}),
            ),
            (
                "Input.emulateTouchFromMouseEvent",
                json!({"type": "mouseReleased", "x": 80, "y": 1, "button": "left"}),
            ),
        ]);
        assert_eq!(got[2], Judged::As(Act::Release { x: 80.0, y: 1.0 }));
    }

    #[test]
    fn a_finger_going_down_is_judged_whatever_the_event_calls_it() {
        // A tap: judged as it goes down, nothing at its end.
        let got = run(&[
            touch("touchStart", json!([{ "x": 3, "y": 4 }])),
            touch("touchEnd", json!([])),
        ]);
        assert_eq!(
            got,
            [
                Judged::As(Act::Press { x: 3.0, y: 4.0 }),
                Judged::As(Act::Motion)
            ]
        );
        // A second finger through touchMove: a press where it lands.
        let got = run(&[
            touch("touchStart", json!([{ "id": 0, "x": 3, "y": 4 }])),
            touch("touchMove", json!([{ "id": 1, "x": 300, "y": 40 }])),
            touch("touchEnd", json!([])),
        ]);
        assert_eq!(got[1], Judged::As(Act::Press { x: 300.0, y: 40.0 }));
        // A touchMove with nothing down is a finger going down.
        let got = run(&[touch("touchMove", json!([{ "x": 7, "y": 8 }]))]);
        assert_eq!(got[0], Judged::As(Act::Press { x: 7.0, y: 8.0 }));
        // A finger dragged and lifted: judged where it lifts.
        let got = run(&[
            touch("touchStart", json!([{ "id": 2, "x": 3, "y": 4 }])),
            touch("touchMove", json!([{ "id": 2, "x": 200, "y": 4 }])),
            touch("touchEnd", json!([])),
        ]);
        assert_eq!(
            got[1..],
            [
                Judged::As(Act::Motion),
                Judged::As(Act::Release { x: 200.0, y: 4.0 })
            ]
        );
        // Dragged, then another finger instead of it: two acts at once.
        let got = run(&[
            touch("touchStart", json!([{ "id": 0, "x": 3, "y": 4 }])),
            touch("touchMove", json!([{ "id": 0, "x": 90, "y": 4 }])),
            touch("touchMove", json!([{ "id": 1, "x": 300, "y": 40 }])),
        ]);
        assert_eq!(got[2], Judged::TwoAtOnce);
        // A cancel acts on nothing.
        let got = run(&[
            touch("touchStart", json!([{ "x": 3, "y": 4 }])),
            touch("touchMove", json!([{ "x": 90, "y": 4 }])),
            touch("touchCancel", json!([])),
        ]);
        assert_eq!(got[2], Judged::As(Act::Motion));
    }

    #[test]
    fn what_is_down_is_per_tab() {
        let mut g = Gestures::default();
        let press = json!({ "type": "mousePressed", "x": 5, "y": 5 });
        g.sent(
            "A",
            "Input.dispatchMouseEvent",
            &press,
            &Act::Press { x: 5.0, y: 5.0 },
        );
        let up = Act::Release { x: 5.0, y: 5.0 };
        assert_eq!(g.judge("A", up.clone()), Judged::As(Act::Motion));
        assert_eq!(g.judge("B", up.clone()), Judged::As(up));
    }
}
