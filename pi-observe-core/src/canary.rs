//! Canaries: a corpus of real-format secrets, one per built-in scrubber rule, for checks that
//! no known secret survives a sink — the test suites and `pi observe canary`, which plants
//! them in a real run and looks for them in what each sink would send.

/// One secret in a real format, and the part of it that must never leave the machine.
#[derive(Debug, Clone)]
pub struct SecretSample {
    /// The format (matches a built-in scrubber rule's purpose, e.g. `github_token`).
    pub format: &'static str,
    /// The secret as it appears in text (a token, or a `NAME=value` pair).
    pub text: String,
    /// How it appears in an `.env` file or an `env` dump.
    pub env_line: String,
    /// The part that must not survive scrubbing.
    pub secret: String,
}

fn sample(
    format: &'static str,
    text: impl Into<String>,
    env_line: impl Into<String>,
    secret: impl Into<String>,
) -> SecretSample {
    SecretSample { format, text: text.into(), env_line: env_line.into(), secret: secret.into() }
}

/// Every built-in format at least once, each with a distinct value (so a test can tell which
/// one survived).
pub fn secret_samples() -> Vec<SecretSample> {
    let openai = "sk-proj-Q7cZ2mW9xR4tL8vN1bK6hJ3fD5sA0gYe";
    let anthropic = "sk-ant-api03-Xy9Lq2Wm8Nz4Rt6Vb1Kc3Jh5Gf7Dd0SaPp";
    let stripe = "sk_live_51HqK8aL2mN9pQ3rS4tU5vW6x";
    let stripe_restricted = "rk_live_51HqK8aL2mN9pQ3rS4tU5vW6y";
    let aws_id = "AKIAZ7QW3ER5TY8UI2OP";
    let aws_secret = "wJalrXUtnFEMIK7MDENGbPxRfiCYzEXAMPLEKEYq";
    let ghp = "ghp_R4nd0mT0k3nV4lu3Xq9Zw8Yv7Ut6Sr5Qp4";
    let github_pat = "github_pat_11ABCDEFG0_R4nd0mT0k3nV4lu3Xq9Zw8Yv7Ut6";
    let glpat = "glpat-Xq9Zw8Yv7Ut6Sr5Qp4On3";
    let slack = "xoxb-123456789012-R4nd0mSl4ckT0k3n";
    let google = "AIzaSyD4Xq9Zw8Yv7Ut6Sr5Qp4On3Mm2Ll1Kk0J";
    let npm = "npm_R4nd0mNpmT0k3nXq9Zw8Yv7Ut6Sr5Qp4On3Z";
    let hf = "hf_R4nd0mHfT0k3nXq9Zw8Yv7Ut6Sr5Qp4On";
    let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJjYW5hcnkifQ.c2lnbmF0dXJlQ2FuYXJ5WHE5";
    let pem =
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAACanaryPem\n-----END OPENSSH PRIVATE KEY-----";
    vec![
        sample("provider_key (OpenAI)", openai, format!("OPENAI_API_KEY={openai}"), "Q7cZ2mW9xR4tL8vN1bK6"),
        sample(
            "provider_key (Anthropic)",
            anthropic,
            format!("ANTHROPIC_API_KEY={anthropic}"),
            "Xy9Lq2Wm8Nz4Rt6Vb1Kc3",
        ),
        sample("stripe_key", stripe, format!("STRIPE_KEY={stripe}"), "51HqK8aL2mN9pQ3rS4tU5vW6x"),
        sample(
            "stripe_key (restricted)",
            stripe_restricted,
            format!("STRIPE_RK={stripe_restricted}"),
            "51HqK8aL2mN9pQ3rS4tU5vW6y",
        ),
        sample("aws_access_key_id", aws_id, format!("AWS_ACCESS_KEY_ID={aws_id}"), aws_id),
        sample(
            "aws_secret_access_key",
            format!("aws_secret_access_key = {aws_secret}"),
            format!("AWS_SECRET_ACCESS_KEY={aws_secret}"),
            aws_secret,
        ),
        sample("github_token", ghp, format!("GH_TOKEN={ghp}"), "R4nd0mT0k3nV4lu3Xq9Zw8"),
        sample("github_token (fine-grained)", github_pat, format!("GITHUB_PAT={github_pat}"), "11ABCDEFG0_R4nd0m"),
        sample("gitlab_token", glpat, format!("GITLAB_PAT={glpat}"), "Xq9Zw8Yv7Ut6Sr5Qp4On3"),
        sample("slack_token", slack, format!("SLACK_BOT={slack}"), "R4nd0mSl4ckT0k3n"),
        sample("google_api_key", google, format!("GOOGLE_API_KEY={google}"), "SyD4Xq9Zw8Yv7Ut6Sr5Qp4"),
        sample("npm_token", npm, format!("NPM_CONFIG_AUTH={npm}"), "R4nd0mNpmT0k3n"),
        sample("huggingface_token", hf, format!("HF_HUB={hf}"), "R4nd0mHfT0k3n"),
        sample("jwt", jwt, format!("SESSION_JWT={jwt}"), "eyJzdWIiOiJjYW5hcnkifQ"),
        sample(
            "bearer",
            "Authorization: Bearer R4nd0mB34r3rT0k3nXq9",
            "AUTH_HEADER=Bearer R4nd0mB34r3rT0k3nXq9",
            "R4nd0mB34r3rT0k3nXq9",
        ),
        sample(
            "basic_auth",
            "Authorization: Basic YWxpY2U6aHVudGVyMkNhbmFyeQ==",
            "HTTP_AUTHORIZATION=Basic YWxpY2U6aHVudGVyMkNhbmFyeQ==",
            "YWxpY2U6aHVudGVyMkNhbmFyeQ",
        ),
        sample(
            "private_key",
            pem,
            "DEPLOY_KEY=-----BEGIN OPENSSH PRIVATE KEY-----\\nb3BlbnNzaC1rZXktdjEAAAAACanaryPem\\n-----END OPENSSH PRIVATE KEY-----",
            "b3BlbnNzaC1rZXktdjEAAAAACanaryPem",
        ),
        sample(
            "url_credentials",
            "https://deploy:Hunt3rPassw0rdCanary@git.example.com/repo.git",
            "GIT_REMOTE=https://deploy:Hunt3rPassw0rdCanary@git.example.com/repo.git",
            "Hunt3rPassw0rdCanary",
        ),
        sample("key_value (password)", "password=hunter2CanaryPw", "PASSWORD=hunter2CanaryPw", "hunter2CanaryPw"),
        sample(
            "key_value (DB_PASSWORD)",
            "DB_PASSWORD=hunter2CanaryDb",
            "DB_PASSWORD=hunter2CanaryDb",
            "hunter2CanaryDb",
        ),
        sample(
            "key_value (NAME_PASSWORD)",
            "SMTP_PASSWORD: hunter2CanarySmtp",
            "SMTP_PASSWORD=hunter2CanarySmtp",
            "hunter2CanarySmtp",
        ),
        sample("key_value (DB_SECRET)", "DB_SECRET=CanaryDbSecret77", "DB_SECRET=CanaryDbSecret77", "CanaryDbSecret77"),
        sample("key_value (API_TOKEN)", "API_TOKEN=CanaryApiTok88", "API_TOKEN=CanaryApiTok88", "CanaryApiTok88"),
        sample(
            "key_value (GITHUB_TOKEN, opaque)",
            "GITHUB_TOKEN=opaqueCanaryValue99",
            "GITHUB_TOKEN=opaqueCanaryValue99",
            "opaqueCanaryValue99",
        ),
        sample(
            "key_value (JSON api_key)",
            r#"{"api_key": "zzCanaryJsonKeyzz"}"#,
            "API_KEY=zzCanaryJsonKeyzz",
            "zzCanaryJsonKeyzz",
        ),
        sample(
            "key_value (Azure AccountKey)",
            "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=Q2FuYXJ5QXp1cmVLZXk0NTY3ODk=;EndpointSuffix=core.windows.net",
            "AZURE_STORAGE_CONNECTION_STRING=DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=Q2FuYXJ5QXp1cmVLZXk0NTY3ODk=",
            "Q2FuYXJ5QXp1cmVLZXk0NTY3ODk",
        ),
    ]
}
