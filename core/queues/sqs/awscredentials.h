#pragma once

#include <QByteArray>
#include <QString>

#include <optional>

namespace once {

// AWS credentials. Secrets: never logged, stored, shown or put in an error, not even in
// part; only the access key id may be named.
struct AwsCredentials
{
    QByteArray accessKeyId;
    QByteArray secretAccessKey;
    QByteArray sessionToken; // empty unless temporary credentials
};

// Where the AWS CLI and SDKs look, in their order: AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY (with AWS_SESSION_TOKEN), else the profile AWS_PROFILE (default
// "default") of the shared credentials file (AWS_SHARED_CREDENTIALS_FILE, default
// ~/.aws/credentials). None found: nullopt with a one-line error saying where it looked.
std::optional<AwsCredentials> loadAwsCredentials(QString *error);

} // namespace once
