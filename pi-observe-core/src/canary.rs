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
        // Formats found in neutral context: no `token:`-style word in front of the value.
        sample(
            "gcp_oauth_token",
            "curl -H 'x: ya29.a0AfH6SMCanaryGcpT0k3nXq9Zw8Yv7Ut6' https://storage.googleapis.com",
            "GOOGLE_OAUTH_ACCESS=ya29.a0AfH6SMCanaryGcpT0k3nXq9Zw8Yv7Ut6",
            "a0AfH6SMCanaryGcpT0k3n",
        ),
        sample(
            "slack_webhook",
            "posting to https://hooks.slack.com/services/T0CANARY1/B0CANARY2/CanaryW3bh00kS3cr3tXq9 now",
            "SLACK_HOOK=https://hooks.slack.com/services/T0CANARY1/B0CANARY2/CanaryW3bh00kS3cr3tXq9",
            "CanaryW3bh00kS3cr3tXq9",
        ),
        sample(
            "discord_webhook",
            "see https://discord.com/api/webhooks/123456789012345678/CanaryD1sc0rdH00kXq9Zw8Yv7",
            "DISCORD_HOOK=https://discord.com/api/webhooks/123456789012345678/CanaryD1sc0rdH00kXq9Zw8Yv7",
            "CanaryD1sc0rdH00kXq9Zw8Yv7",
        ),
        sample(
            "azure_sas_signature",
            "https://acct.blob.core.windows.net/c/b.txt?sv=2022-11-02&sp=r&se=2030-01-01&sig=Q2FuYXJ5U2FzU2ln%2BXq9Zw8%3D",
            "BLOB_URL=https://acct.blob.core.windows.net/c/b.txt?sv=2022-11-02&sig=Q2FuYXJ5U2FzU2ln%2BXq9Zw8%3D",
            "Q2FuYXJ5U2FzU2ln",
        ),
        sample(
            "key_value (Azure SharedAccessKey)",
            "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=root;SharedAccessKey=Q2FuYXJ5U2JLZXk=",
            "SERVICEBUS=Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=root;SharedAccessKey=Q2FuYXJ5U2JLZXk=",
            "Q2FuYXJ5U2JLZXk",
        ),
        sample(
            "mysql_password_flag",
            "mysql -h db -u root -pCanaryMysqlPw9 shop",
            "DUMP_CMD=mysqldump -u root -pCanaryMysqlPw9 shop",
            "CanaryMysqlPw9",
        ),
        sample(
            "url_credentials (psql)",
            "psql postgresql://app:CanaryPg%40Pw7@db.internal:5432/shop",
            "DATABASE_URL=postgres://app:CanaryPg%40Pw7@db.internal:5432/shop",
            "CanaryPg%40Pw7",
        ),
        sample(
            "url_credentials (@ in the password)",
            "git clone https://bot:Canary@Pw@8@git.example.com/r.git",
            "REMOTE=https://bot:Canary@Pw@8@git.example.com/r.git",
            "Pw@8",
        ),
        sample(
            "docker_login_password",
            "docker login -u ci -p CanaryD0ckerPw registry.example.com",
            "LOGIN_CMD=docker login --password CanaryD0ckerPw registry.example.com",
            "CanaryD0ckerPw",
        ),
        sample(
            "netrc_password",
            "machine api.example.com login alice password CanaryN3trcPw",
            "NETRC=machine api.example.com login alice password CanaryN3trcPw",
            "CanaryN3trcPw",
        ),
        sample(
            "netrc_password (own line)",
            "machine api.example.com\n  login alice\n  password CanaryN3trcLine\n",
            "NETRC_LINE=machine h login a password CanaryN3trcLine",
            "CanaryN3trcLine",
        ),
        sample(
            "curl_user_password",
            "curl -u deploy:CanaryCurlPw5 https://api.example.com/v1",
            "FETCH=curl --user deploy:CanaryCurlPw5 https://api.example.com/v1",
            "CanaryCurlPw5",
        ),
        sample(
            "twilio_key",
            "twilio api key SKc4a9a1f00dcafe000000000000000042 in use",
            "TWILIO_KEY_SID=SKc4a9a1f00dcafe000000000000000042",
            "c4a9a1f00dcafe",
        ),
        sample(
            "sendgrid_key",
            "SG.CanarySendGr1dXq9Zw8.Yv7Ut6Sr5Qp4On3Mm2Ll1Kk0Jj9Ii8Hh7Gg6Ff5Ee4Dd3",
            "SENDGRID=SG.CanarySendGr1dXq9Zw8.Yv7Ut6Sr5Qp4On3Mm2Ll1Kk0Jj9Ii8Hh7Gg6Ff5Ee4Dd3",
            "CanarySendGr1d",
        ),
        sample(
            "mailgun_key",
            "mailgun key-0c4a9a1f00dcanary000000000000042 works",
            "MAILGUN=key-0c4a9a1f00dcanary000000000000042",
            "0c4a9a1f00dcanary",
        ),
        sample(
            "discord_bot_token",
            "bot MTAxCanaryD1sc0rdB0tXq9Zw8.GcAnRy.CanaryD1sc0rdB0tS3cr3tXq9Zw8Yv7Ut6",
            "DISCORD=MTAxCanaryD1sc0rdB0tXq9Zw8.GcAnRy.CanaryD1sc0rdB0tS3cr3tXq9Zw8Yv7Ut6",
            "CanaryD1sc0rdB0tS3cr3t",
        ),
        sample(
            "databricks_token",
            "host adb-1.azuredatabricks.net with dapi0c4a9a1f00dcafe00000000000000042",
            "DATABRICKS=dapi0c4a9a1f00dcafe00000000000000042",
            "0c4a9a1f00dcafe0000",
        ),
        sample(
            "vault_token",
            "vault login hvs.CanaryVaultT0k3nXq9Zw8Yv7Ut6Sr5",
            "VAULT_ADDR_TOK=hvs.CanaryVaultT0k3nXq9Zw8Yv7Ut6Sr5",
            "CanaryVaultT0k3n",
        ),
        sample(
            "datadog_key",
            "datadog api 0c4a9a1f00dcafe0000000000000d0d0 for the agent",
            "DD_APP_KEY=0c4a9a1f00dcafe0000000000000d0d0aaaabbbb",
            "0c4a9a1f00dcafe0000000000000d0d0",
        ),
        sample(
            "datadog_key (Twilio auth token)",
            "twilio auth 0d0c4a9a1f00dcafe000000000000777 for sms",
            "TWILIO_AUTH_TOKEN=0d0c4a9a1f00dcafe000000000000777",
            "0d0c4a9a1f00dcafe000000000000777",
        ),
        sample(
            "private_key (ENCRYPTED)",
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIFHDBOBgkqhkiG9w0BBQ0wQTCanaryEnc\n-----END ENCRYPTED PRIVATE KEY-----",
            "ENC_KEY=-----BEGIN ENCRYPTED PRIVATE KEY-----\\nMIIFHDBOBgkqhkiG9w0BBQ0wQTCanaryEnc\\n-----END ENCRYPTED PRIVATE KEY-----",
            "MIIFHDBOBgkqhkiG9w0BBQ0wQTCanaryEnc",
        ),
        sample(
            "age_secret_key",
            "AGE-SECRET-KEY-1QCANARYAGEKEY000000000000000000000000000000000000000000000",
            "AGE_KEY=AGE-SECRET-KEY-1QCANARYAGEKEY000000000000000000000000000000000000000000000",
            "QCANARYAGEKEY",
        ),
        sample(
            "key_value (Azure AccountKey)",
            "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=Q2FuYXJ5QXp1cmVLZXk0NTY3ODk=;EndpointSuffix=core.windows.net",
            "AZURE_STORAGE_CONNECTION_STRING=DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=Q2FuYXJ5QXp1cmVLZXk0NTY3ODk=",
            "Q2FuYXJ5QXp1cmVLZXk0NTY3ODk",
        ),
    ]
}
