//! The client the hub's rfc2136 output drives: each operation is one
//! TSIG-signed UPDATE (or two plain queries for a read) to one
//! authoritative server, and its answer classified into success or an
//! [`Error`] — checked to answer this request, and its TSIG verified
//! before a success is believed.

use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hickory_proto::op::{Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::rdata::tsig::TsigError;
use hickory_proto::rr::{Name, RecordType};

use gwhub_dns_rules::UpdatePlan;

use crate::error::Error;
use crate::key::{KeySource, TsigKey};
use crate::message::{self, Checked, Expect, Owner, RType, RecordSet};
use crate::transport;

/// What the server holds for a record set: its values (addresses, or a
/// CNAME target without the trailing dot; sorted), their TTL, and the
/// values of the TXT records at the ownership name (sorted). A name with
/// nothing (NXDOMAIN or NODATA) gives empty lists.
///
/// A read is literal only where the name exists: a name that does not
/// exist under a wildcard reads as the wildcard's records, as any query
/// would. Once our ownership TXT is below the name, the name exists (an
/// empty non-terminal at least) and no wildcard answers for it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadBack {
    /// The record set's values.
    pub records: Vec<String>,
    /// Their TTL (the smallest, should they differ); `None` without records.
    pub ttl: Option<u32>,
    /// The TXT values at the ownership name.
    pub txt: Vec<String>,
}

/// A client of one authoritative server.
#[derive(Debug, Clone)]
pub struct Client {
    server: SocketAddr,
    key: KeySource,
    timeout: Duration,
}

impl Client {
    /// A client sending to `server` (TCP), signing with `key`'s key of the
    /// moment, and giving up on an operation after `timeout`.
    pub fn new(server: SocketAddr, key: KeySource, timeout: Duration) -> Self {
        Client {
            server,
            key,
            timeout,
        }
    }

    /// The server.
    pub fn server(&self) -> SocketAddr {
        self.server
    }

    /// The key source (for [`KeySource::reload_error`]).
    pub fn key_source(&self) -> &KeySource {
        &self.key
    }

    /// Publishes `set` in `zone` (its apex) under `owner` in one UPDATE:
    /// with [`Expect::Create`] only where neither the set's type nor an
    /// ownership record is there yet, with [`Expect::Update`] only where
    /// the ownership record is exactly `owner`'s. Anything else is
    /// [`Error::Conflict`] and changes nothing.
    pub async fn publish(
        &self,
        zone: &str,
        set: &RecordSet,
        owner: &Owner,
        expect: Expect,
    ) -> Result<(), Error> {
        let (m, c) = message::publish(zone, set, owner, expect)?;
        let conflict = match expect {
            Expect::Create => Conflict::Create(set.rtype),
            Expect::Update => Conflict::Owner(set.rtype),
        };
        self.update(m, &c, conflict).await
    }

    /// Deletes the `rtype` record set at `name` in `zone` and its
    /// ownership record, in one UPDATE, only where the ownership record is
    /// exactly `owner`'s ([`Error::Conflict`] otherwise). Deleting what is
    /// already gone is a conflict too: the ownership record is missing.
    pub async fn delete(
        &self,
        zone: &str,
        name: &str,
        rtype: RType,
        owner: &Owner,
    ) -> Result<(), Error> {
        let (m, c) = message::delete(zone, name, rtype, owner)?;
        self.update(m, &c, Conflict::Owner(rtype)).await
    }

    /// Sends `plan` (one name's changes, all record types and ownership
    /// records, from `gwhub_dns_rules::plan`) as one UPDATE: the server
    /// applies all of it or, when a prerequisite fails, nothing
    /// ([`Error::Conflict`]).
    pub async fn apply(&self, plan: &UpdatePlan) -> Result<(), Error> {
        let (m, c) = message::from_plan(plan)?;
        self.update(m, &c, Conflict::Name).await
    }

    /// Reads the `rtype` record set at `name` and the TXT records at
    /// `owner_txt_name` back with two plain queries (unsigned, not
    /// recursive; the server must answer authoritatively).
    pub async fn read(
        &self,
        name: &str,
        rtype: RType,
        owner_txt_name: &str,
    ) -> Result<ReadBack, Error> {
        let n = message::name("name", name)?;
        let txt_name = message::name("ownership record name", owner_txt_name)?;
        let records = self.query(&n, rtype.wire()).await?;
        let txt = self.query(&txt_name, RecordType::TXT).await?;
        let mut out = ReadBack {
            ttl: records.iter().map(|r| r.ttl).min(),
            records: records
                .iter()
                .filter_map(|r| message::value(&r.data))
                .collect(),
            txt: txt
                .iter()
                .filter_map(|r| message::txt_value(&r.data))
                .collect(),
        };
        out.records.sort();
        out.records.dedup();
        out.txt.sort();
        Ok(out)
    }

    async fn query(
        &self,
        name: &Name,
        rtype: RecordType,
    ) -> Result<Vec<hickory_proto::rr::Record>, Error> {
        let request = message::query(name, rtype);
        let bytes = request.to_vec().map_err(|e| self.invalid(e))?;
        let raw = transport::exchange(self.server, self.timeout, bytes).await?;
        let answer = self.parse(&request, &raw)?;
        match answer.metadata.response_code {
            ResponseCode::NoError | ResponseCode::NXDomain => {}
            ResponseCode::Refused => {
                return Err(Error::Rejected {
                    server: self.server,
                    rcode: "REFUSED".into(),
                    reason: format!(
                        "the server refused the query for {} {rtype}",
                        message::display(name)
                    ),
                });
            }
            code => {
                return Err(Error::Rejected {
                    server: self.server,
                    rcode: mnemonic(code),
                    reason: format!("the query for {} {rtype} failed", message::display(name)),
                });
            }
        }
        if !answer.metadata.authoritative {
            return Err(Error::Rejected {
                server: self.server,
                rcode: mnemonic(answer.metadata.response_code),
                reason: format!(
                    "the answer for {} is not authoritative: the server does not serve its zone",
                    message::display(name)
                ),
            });
        }
        Ok(answer
            .answers
            .into_iter()
            .filter(|r| r.record_type() == rtype && r.name == *name)
            .collect())
    }

    async fn update(&self, mut m: Message, c: &Checked, conflict: Conflict) -> Result<(), Error> {
        let key = self.key.current();
        let signer = key
            .signer()
            .map_err(|e| self.bad_key(&key, e.to_string()))?;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let Some(mut verifier) = m.finalize(&signer, now).map_err(|e| self.invalid(e))? else {
            return Err(self.invalid("the TSIG signer gave no verifier for the answer"));
        };
        let bytes = m.to_vec().map_err(|e| self.invalid(e))?;
        let raw = transport::exchange(self.server, self.timeout, bytes).await?;
        let answer = self.parse(&m, &raw)?;
        let rcode = answer.metadata.response_code;
        match answer.signature().map(|s| s.data.error) {
            Some(Some(error)) => return Err(self.tsig_error(&key, rcode, error)),
            Some(None) => {
                // Signed: the signature must verify, or the answer is no one's.
                if let Err(e) = verifier.verify(&raw) {
                    return Err(Error::BadAnswer {
                        server: self.server,
                        reason: format!(
                            "the answer's TSIG does not verify with key {} ({}): {e}; \
                             whether the update took effect is unknown",
                            key.name(),
                            key.algorithm()
                        ),
                    });
                }
            }
            None if rcode == ResponseCode::NoError => {
                return Err(Error::BadAnswer {
                    server: self.server,
                    reason: "the answer to a signed update is not signed; \
                             whether the update took effect is unknown"
                        .into(),
                });
            }
            None if rcode == ResponseCode::NotAuth => {
                return Err(self.bad_key(
                    &key,
                    format!(
                        "NOTAUTH, unsigned: the server did not accept the key, \
                         or it is not authoritative for zone {}",
                        message::display(&c.zone)
                    ),
                ));
            }
            // An unsigned failure is believed: it can only stop a write.
            None => {}
        }
        self.classify(rcode, c, conflict, &key)
    }

    fn classify(
        &self,
        rcode: ResponseCode,
        c: &Checked,
        conflict: Conflict,
        key: &TsigKey,
    ) -> Result<(), Error> {
        let name = message::display(&c.name);
        let txt = message::display(&c.txt_name);
        let conflict = |rcode: &'static str| Error::Conflict {
            name: name.clone(),
            rcode,
            detail: conflict.explain(rcode, &name, &txt),
        };
        match rcode {
            ResponseCode::NoError => Ok(()),
            ResponseCode::YXRRSet => Err(conflict("YXRRSET")),
            ResponseCode::NXRRSet => Err(conflict("NXRRSET")),
            ResponseCode::YXDomain => Err(conflict("YXDOMAIN")),
            ResponseCode::NXDomain => Err(conflict("NXDOMAIN")),
            ResponseCode::Refused => Err(Error::Refused {
                server: self.server,
                zone: message::display(&c.zone),
                key: key.name(),
            }),
            ResponseCode::NotAuth => Err(self.rejected(
                "NOTAUTH",
                format!(
                    "the server is not authoritative for zone {}",
                    message::display(&c.zone)
                ),
            )),
            ResponseCode::NotZone => Err(self.rejected(
                "NOTZONE",
                format!(
                    "{name} or {txt} is not within zone {} as the server has it \
                     (a delegated subzone?)",
                    message::display(&c.zone)
                ),
            )),
            ResponseCode::ServFail => Err(self.rejected(
                "SERVFAIL",
                "the server failed to apply the update (see its log)".into(),
            )),
            ResponseCode::FormErr => {
                Err(self.rejected("FORMERR", "the server could not parse the update".into()))
            }
            ResponseCode::NotImp => Err(self.rejected(
                "NOTIMP",
                "the server does not implement dynamic updates".into(),
            )),
            other => Err(self.rejected(&mnemonic(other), "unexpected response code".into())),
        }
    }

    /// The answer parsed and checked to be the answer to `request`.
    fn parse(&self, request: &Message, raw: &[u8]) -> Result<Message, Error> {
        let bad = |reason: String| Error::BadAnswer {
            server: self.server,
            reason,
        };
        let answer = Message::from_vec(raw).map_err(|e| bad(format!("not a DNS message: {e}")))?;
        if answer.metadata.id != request.metadata.id {
            return Err(bad(format!(
                "message id {} answers another request (sent {})",
                answer.metadata.id, request.metadata.id
            )));
        }
        if answer.metadata.message_type != MessageType::Response {
            return Err(bad("a query, not a response".into()));
        }
        if answer.metadata.op_code != request.metadata.op_code {
            return Err(bad(format!(
                "opcode {:?} answers {:?}",
                answer.metadata.op_code, request.metadata.op_code
            )));
        }
        // A server echoes the question (the zone of an UPDATE); one that
        // answers with another was not asked this.
        if !answer.queries.is_empty() && answer.queries != request.queries {
            return Err(bad("the answer is for another question".into()));
        }
        if request.metadata.op_code == OpCode::Query
            && answer.metadata.response_code == ResponseCode::NoError
            && answer.metadata.truncation
        {
            return Err(bad("truncated over TCP".into()));
        }
        Ok(answer)
    }

    fn tsig_error(&self, key: &TsigKey, rcode: ResponseCode, error: TsigError) -> Error {
        let reason = match error {
            // Knot answers BADKEY too for a known key its ACL does not let
            // update the zone (BIND answers REFUSED there).
            TsigError::BadKey => {
                "BADKEY: it does not know a key of this name and algorithm, \
                 or does not let it update this zone"
            }
            TsigError::BadSig => "BADSIG: the signature does not match its secret for this key",
            TsigError::BadTime => "BADTIME: its clock and ours are more than 300 s apart",
            TsigError::BadTrunc => "BADTRUNC: truncated signature",
            TsigError::Unknown(_) => "TSIG error",
        };
        let code = match error {
            TsigError::Unknown(n) => format!(" {n}"),
            _ => String::new(),
        };
        self.bad_key(key, format!("{}, {reason}{code}", mnemonic(rcode)))
    }

    fn bad_key(&self, key: &TsigKey, reason: String) -> Error {
        Error::BadKey {
            server: self.server,
            key: key.name(),
            algorithm: key.algorithm().to_string(),
            reason,
        }
    }

    fn rejected(&self, rcode: &str, reason: String) -> Error {
        Error::Rejected {
            server: self.server,
            rcode: rcode.to_owned(),
            reason,
        }
    }

    fn invalid(&self, e: impl std::fmt::Display) -> Error {
        Error::Invalid(format!(
            "the message to {} cannot be encoded: {e}",
            self.server
        ))
    }
}

/// A response code as RFC 2136 and dig spell it (NOTAUTH, YXRRSET, ...).
fn mnemonic(rcode: ResponseCode) -> String {
    let s = match rcode {
        ResponseCode::NoError => "NOERROR",
        ResponseCode::FormErr => "FORMERR",
        ResponseCode::ServFail => "SERVFAIL",
        ResponseCode::NXDomain => "NXDOMAIN",
        ResponseCode::NotImp => "NOTIMP",
        ResponseCode::Refused => "REFUSED",
        ResponseCode::YXDomain => "YXDOMAIN",
        ResponseCode::YXRRSet => "YXRRSET",
        ResponseCode::NXRRSet => "NXRRSET",
        ResponseCode::NotAuth => "NOTAUTH",
        ResponseCode::NotZone => "NOTZONE",
        other => return format!("RCODE {}", u16::from(other)),
    };
    s.to_owned()
}

/// Which prerequisites a conflict is about, to say it in words.
#[derive(Debug, Clone, Copy)]
enum Conflict {
    /// Create: the type (or, for a CNAME, anything) at the name, a
    /// conflicting type, or an ownership record.
    Create(RType),
    /// Update or delete: our ownership record.
    Owner(RType),
    /// A whole name's update: any of its prerequisites.
    Name,
}

impl Conflict {
    fn explain(self, rcode: &str, name: &str, txt: &str) -> String {
        match self {
            Conflict::Create(RType::Cname) => format!(
                "the name is in use or an ownership record is at {txt}: \
                 another owner, or records made by hand, hold it"
            ),
            Conflict::Create(rtype) => format!(
                "{rtype} or CNAME records are at {name}, or an ownership record is at {txt}: \
                 another owner, or records made by hand, hold it"
            ),
            Conflict::Owner(rtype) if rcode == "YXRRSET" => {
                format!("a record type that cannot stand beside {rtype} is at {name}")
            }
            Conflict::Owner(_) => format!(
                "the ownership record at {txt} is missing or not ours: another owner holds the name"
            ),
            Conflict::Name => format!(
                "the name's records or ownership records (such as {txt}) are not as read: \
                 another owner, records made by hand, or a change since"
            ),
        }
    }
}
