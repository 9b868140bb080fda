//! The `rfc2136` output (spec section 8): per changed record type of a
//! name, one TSIG-signed UPDATE with the ownership prerequisites
//! (`gwhub_dns_rules` ownership: create only where nothing and no
//! ownership record is; update and delete only where the ownership record
//! is exactly ours), through `gwhub_dns_rfc2136`. A name another owner
//! holds is never overwritten: the outcome is a conflict.
//!
//! Create vs update: a type the hub has not written since it started (or
//! since the last `--dns-resync`, which forgets what was written) is read
//! back first and classified: absent -> create; ours as it should be ->
//! nothing; ours drifted (a hand-deleted address, another TTL) -> update,
//! which repairs it; someone else's -> conflict.

use std::net::{Ipv4Addr, Ipv6Addr};

use gwhub_dns_rfc2136::{Client, Error, Expect, Owner, RType};
use gwhub_dns_rules::{
    Found, Hostname, Ownership, Rdata, ReadBack, RecordSet, RecordType, classify, ownership_name,
};

use super::config::Rfc2136Config;
use super::endpoint::set_targets;
use super::names::{Job, Outcome};

/// Writes to one authoritative server.
pub(crate) struct RfcOutput {
    client: Client,
    owner_id: String,
}

fn rtype(t: RecordType) -> RType {
    match t {
        RecordType::A => RType::A,
        RecordType::Aaaa => RType::Aaaa,
        RecordType::Cname => RType::Cname,
    }
}

fn rdata(t: RecordType, v: &str) -> Option<Rdata> {
    match t {
        RecordType::A => v.parse::<Ipv4Addr>().ok().map(Rdata::A),
        RecordType::Aaaa => v.parse::<Ipv6Addr>().ok().map(Rdata::Aaaa),
        RecordType::Cname => Hostname::parse(v).ok().map(Rdata::Cname),
    }
}

fn failed(host: &str, t: RecordType, e: &Error) -> Outcome {
    if e.is_conflict() {
        Outcome::Conflict(format!("{t}: {e}"))
    } else {
        Outcome::Failed(format!("{host} {t}: {e}"))
    }
}

impl RfcOutput {
    pub(crate) fn new(config: &Rfc2136Config, owner_id: &str) -> Self {
        RfcOutput {
            client: Client::new(config.server, config.key.clone(), config.timeout),
            owner_id: owner_id.to_owned(),
        }
    }

    /// Makes the server hold `job.sets` for `job.host` (see the module docs).
    #[tracing::instrument(skip_all, fields(host = %job.host, server = %self.client.server()))]
    pub(crate) async fn write(&self, job: &Job) -> Outcome {
        let ours = match Ownership::new(&self.owner_id, job.owner.clone()) {
            Ok(o) => o,
            Err(e) => return Outcome::Failed(e.to_string()),
        };
        let host = match Hostname::parse(&job.host) {
            Ok(h) => h,
            Err(e) => return Outcome::Failed(e.to_string()),
        };
        for t in RecordType::ALL {
            let (new, old) = (job.sets.get(&t), job.previous.get(&t));
            if new.is_none() && old.is_none() || (new.is_some() && new == old) {
                continue;
            }
            let txt_name = match ownership_name(&host, t) {
                Ok(n) => n,
                Err(e) => return Outcome::Failed(e.to_string()),
            };
            let owner = Owner {
                txt_name: txt_name.clone(),
                txt_value: ours.value(),
            };
            let result = match new {
                Some(set) => self.publish(job, &ours, &owner, set, old.is_some()).await,
                None => {
                    match self
                        .client
                        .delete(&job.zone, &job.host, rtype(t), &owner)
                        .await
                    {
                        // Already gone (the ownership record too): done.
                        Err(e) if e.is_conflict() => {
                            match self.found(&ours, t, None, &job.host, &txt_name).await {
                                Ok(Found::Absent) => Ok(()),
                                Ok(_) => Err(e),
                                Err(read) => Err(read),
                            }
                        }
                        other => other,
                    }
                }
            };
            if let Err(e) = result {
                return failed(&job.host, t, &e);
            }
        }
        Outcome::Written
    }

    async fn found(
        &self,
        ours: &Ownership,
        t: RecordType,
        expected: Option<&RecordSet>,
        host: &str,
        txt_name: &str,
    ) -> Result<Found, Error> {
        let back = self.client.read(host, rtype(t), txt_name).await?;
        let read = ReadBack {
            records: back.records.iter().filter_map(|v| rdata(t, v)).collect(),
            ttl_seconds: back.ttl,
            txt: back.txt,
        };
        Ok(classify(ours, t, expected, &read))
    }

    async fn publish(
        &self,
        job: &Job,
        ours: &Ownership,
        owner: &Owner,
        set: &RecordSet,
        written_before: bool,
    ) -> Result<(), Error> {
        let t = set.record_type();
        let expect = if written_before {
            Expect::Update
        } else {
            match self
                .found(ours, t, Some(set), &job.host, &owner.txt_name)
                .await?
            {
                Found::Absent => Expect::Create,
                Found::Ours => return Ok(()),
                Found::Drifted { why, .. } => {
                    tracing::info!(host = %job.host, record_type = %t, why, "repairing drift");
                    Expect::Update
                }
                Found::Foreign { why } => {
                    return Err(Error::Conflict {
                        name: job.host.clone(),
                        rcode: "YXRRSET",
                        detail: format!("{t}: {why}: never overwritten"),
                    });
                }
            }
        };
        let rfc = gwhub_dns_rfc2136::RecordSet {
            name: job.host.clone(),
            rtype: rtype(t),
            ttl: set.ttl_seconds,
            values: set_targets(set),
        };
        self.client.publish(&job.zone, &rfc, owner, expect).await
    }
}
