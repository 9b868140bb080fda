//! The `rfc2136` output (spec section 8): per changed name, ONE
//! TSIG-signed UPDATE holding all its record types' deletes and adds and
//! the ownership prerequisites, planned by `gwhub_dns_rules`
//! ([`name_changes`], [`plan`]) and sent through `gwhub_dns_rfc2136`
//! ([`Client::apply`]). The server applies the whole name or, when a
//! prerequisite fails, none of it: a name never answers half changed (an A
//! gone before its CNAME is there), and a name another owner holds is
//! never overwritten (the outcome is a conflict).
//!
//! What is known of each type before the update: a type the hub wrote
//! since it started (or since the last `--dns-resync`, which forgets what
//! was written) is taken as written, with our ownership value; any other
//! type the update touches is read back and classified (absent -> create;
//! ours as it should be -> nothing; ours drifted, a hand-deleted address
//! or another TTL -> update, which repairs it; someone else's ->
//! conflict). The first write of a name since the start reads every type
//! back, so a type left from before (an AAAA set no cluster has now) is
//! deleted in the same update.
//!
//! After a start or leader change the controller reads every fleet name
//! back ([`RfcOutput::read_back`]) and seeds its publishers: the records
//! do not say which cluster each address is from, so each is mapped to the
//! clusters whose current reports have it, or who had it when this replica
//! last published them (`published_clusters`); those stay without the
//! rise.
//!
//! A conflict on what was taken as written (a record deleted by hand,
//! another writer) is read back whole and tried once more at once; a
//! second conflict is the outcome.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, Ipv6Addr};

use gwhub_dns_rfc2136::{Client, Error, RType};
use gwhub_dns_rules::{
    Found, Hostname, Known, Ownership, PlanError, Rdata, ReadBack, RecordSet, RecordType, Usable,
    classify, name_changes, ownership_name, plan, published_clusters,
};
use gwhub_hub_rules::aggregate::GatewayKey;

use super::config::Rfc2136Config;
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

fn failed(host: &str, e: &Error) -> Outcome {
    if e.is_conflict() {
        Outcome::Conflict(e.to_string())
    } else {
        Outcome::Failed(format!("{host}: {e}"))
    }
}

fn conflict(host: &str, detail: String) -> Error {
    Error::Conflict {
        name: host.to_owned(),
        rcode: "YXRRSET",
        detail,
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
        let first = self.known(job, &ours, &host, false).await;
        let result = match first {
            Ok(known) => self.send(job, &ours, &host, &known).await,
            Err(e) => Err(e),
        };
        let result = match result {
            Err(e) if e.is_conflict() && !job.previous.is_empty() => {
                tracing::info!(host = %job.host, error = %e, "what was written changed on the server; reading the name back");
                match self.known(job, &ours, &host, true).await {
                    Ok(known) => self.send(job, &ours, &host, &known).await,
                    Err(e) => Err(e),
                }
            }
            other => other,
        };
        match result {
            Ok(()) => Outcome::Written,
            Err(e) => failed(&job.host, &e),
        }
    }

    /// What is known of each type of `job`'s name (see the module docs);
    /// `read_all`: read every type back.
    async fn known(
        &self,
        job: &Job,
        ours: &Ownership,
        host: &Hostname,
        read_all: bool,
    ) -> Result<BTreeMap<RecordType, Known>, Error> {
        let read_all = read_all || job.previous.is_empty();
        let mut known = BTreeMap::new();
        for t in RecordType::ALL {
            let (new, old) = (job.sets.get(&t), job.previous.get(&t));
            let k = match old {
                Some(old) if !read_all => Known::Written(old.clone()),
                _ if read_all || new.is_some() => {
                    Known::Found(self.found(ours, t, new, host).await?)
                }
                _ => continue,
            };
            known.insert(t, k);
        }
        Ok(known)
    }

    /// Plans the name's changes and sends them as one UPDATE (nothing to
    /// change: nothing sent).
    async fn send(
        &self,
        job: &Job,
        ours: &Ownership,
        host: &Hostname,
        known: &BTreeMap<RecordType, Known>,
    ) -> Result<(), Error> {
        let changes = name_changes(ours, &job.sets, known)
            .map_err(|held| conflict(&job.host, held.to_string()))?;
        if changes.is_empty() {
            return Ok(());
        }
        let update = plan(&job.zone, host, ours, &changes).map_err(|e| match e {
            PlanError::NotOurs(..) => conflict(&job.host, e.to_string()),
            other => Error::Invalid(other.to_string()),
        })?;
        self.client.apply(&update).await
    }

    /// Per record type, the clusters the server's sets for `host` publish
    /// (the read-back seeds after a start; see `published_clusters`), from
    /// the addresses in `clusters` (each reporting cluster's usable ones,
    /// and those this replica last published for it).
    pub(crate) async fn read_back(
        &self,
        host: &Hostname,
        owner: &GatewayKey,
        clusters: &[(String, Usable)],
    ) -> Result<BTreeMap<RecordType, BTreeSet<String>>, Error> {
        let ours = Ownership::new(&self.owner_id, owner.clone())
            .map_err(|e| Error::Invalid(e.to_string()))?;
        let mut out = BTreeMap::new();
        for t in RecordType::ALL {
            let read = self.read(t, host).await?;
            let published = published_clusters(&ours, t, &read, clusters);
            if !published.is_empty() {
                out.insert(t, published);
            }
        }
        Ok(out)
    }

    async fn read(&self, t: RecordType, host: &Hostname) -> Result<ReadBack, Error> {
        let txt_name = ownership_name(host, t).map_err(|e| Error::Invalid(e.to_string()))?;
        let back = self.client.read(host.as_str(), rtype(t), &txt_name).await?;
        Ok(ReadBack {
            records: back.records.iter().filter_map(|v| rdata(t, v)).collect(),
            ttl_seconds: back.ttl,
            txt: back.txt,
        })
    }

    async fn found(
        &self,
        ours: &Ownership,
        t: RecordType,
        expected: Option<&RecordSet>,
        host: &Hostname,
    ) -> Result<Found, Error> {
        let read = self.read(t, host).await?;
        let found = classify(ours, t, expected, &read);
        if let Found::Drifted { why, .. } = &found {
            tracing::info!(host = %host, record_type = %t, why, "repairing drift");
        }
        Ok(found)
    }
}
