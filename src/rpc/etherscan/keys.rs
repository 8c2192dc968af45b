//! Optional API keys for the Etherscan paths, for a port that faces a network: when the operator
//! sets some, a call must carry one of them in `apikey`, and each key gets at most `rate` calls a
//! second (a token bucket that holds one second of calls), as Etherscan's plans do. Without keys
//! `apikey` is ignored.

use std::{collections::HashMap, sync::Mutex, time::Instant};

use super::envelope::Answer;

/// Etherscan's refusal of a call without a key, or with one it does not know.
pub const INVALID_KEY: &str = "Missing/Invalid API Key";

/// One key's allowance.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// The keys and what each has left.
#[derive(Debug)]
pub struct ApiKeys {
    rate: u32,
    buckets: Mutex<HashMap<String, Bucket>>,
}

impl ApiKeys {
    /// Admits calls with one of `keys`, `rate` a second each (0: no limit); `None` when `keys`
    /// holds none (every call is admitted).
    pub fn new(keys: &[String], rate: u32) -> Option<Self> {
        let now = Instant::now();
        let buckets: HashMap<String, Bucket> = keys
            .iter()
            .map(|k| k.trim())
            .filter(|k| !k.is_empty())
            .map(|k| (k.to_owned(), Bucket { tokens: f64::from(rate), at: now }))
            .collect();
        (!buckets.is_empty()).then(|| Self { rate, buckets: Mutex::new(buckets) })
    }

    /// Whether a call with `key` may go on at `now`; the refusal to answer if not.
    pub fn admit(&self, key: Option<&str>, now: Instant) -> Result<(), Answer> {
        let mut buckets = self.buckets.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(bucket) = key.and_then(|k| buckets.get_mut(k)) else {
            return Err(Answer::refuse(INVALID_KEY));
        };
        if self.rate == 0 {
            return Ok(());
        }
        let rate = f64::from(self.rate);
        let refill = now.saturating_duration_since(bucket.at).as_secs_f64() * rate;
        bucket.tokens = (bucket.tokens + refill).min(rate);
        bucket.at = now;
        if bucket.tokens < 1.0 {
            return Err(Answer::refuse(format!("Max calls per sec rate limit reached ({}/sec)", self.rate)));
        }
        bucket.tokens -= 1.0;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_key_gets_its_rate_and_no_key_gets_nothing() {
        assert!(ApiKeys::new(&[" ".to_owned()], 5).is_none(), "no keys: every call admitted");
        let keys = ApiKeys::new(&["alpha".to_owned(), "beta".to_owned()], 2).expect("keys");
        let start = Instant::now();
        assert_eq!(keys.admit(None, start), Err(Answer::refuse(INVALID_KEY)));
        assert_eq!(keys.admit(Some("gamma"), start), Err(Answer::refuse(INVALID_KEY)));
        assert_eq!(keys.admit(Some("alpha"), start), Ok(()));
        assert_eq!(keys.admit(Some("alpha"), start), Ok(()));
        let limited = Err(Answer::refuse("Max calls per sec rate limit reached (2/sec)"));
        assert_eq!(keys.admit(Some("alpha"), start), limited);
        assert_eq!(keys.admit(Some("beta"), start), Ok(()), "each key has its own allowance");
        assert_eq!(keys.admit(Some("alpha"), start + Duration::from_millis(300)), limited);
        assert_eq!(keys.admit(Some("alpha"), start + Duration::from_millis(600)), Ok(()));
        assert_eq!(keys.admit(Some("alpha"), start + Duration::from_secs(60)), Ok(()));
        assert_eq!(keys.admit(Some("alpha"), start + Duration::from_secs(60)), Ok(()));
        assert_eq!(
            keys.admit(Some("alpha"), start + Duration::from_secs(60)),
            limited,
            "a second's calls at most"
        );
        let unlimited = ApiKeys::new(&["k".to_owned()], 0).expect("keys");
        for _ in 0..100 {
            assert_eq!(unlimited.admit(Some("k"), start), Ok(()));
        }
    }
}
