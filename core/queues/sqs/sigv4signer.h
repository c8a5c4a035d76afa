#pragma once

#include "queues/sqs/awscredentials.h"

#include <QByteArray>
#include <QDateTime>
#include <QList>
#include <QPair>
#include <QString>

namespace once {

// What Signature Version 4 signs of a request: the method, the path and the query as
// they go on the request line (the path not yet percent-encoded; the query as written,
// percent-encoding allowed), every header in the order it is sent, and the body.
struct SignableRequest
{
    QByteArray method;
    QString path;
    QByteArray query; // without the '?'
    QList<QPair<QByteArray, QByteArray>> headers;
    QByteArray body;
};

// AWS Signature Version 4 (docs.aws.amazon.com, "Create a signed AWS API request"),
// written with QCryptographicHash and QMessageAuthenticationCode. Each step is public so
// that AWS's own test suite can check it: the canonical request, the string to sign and
// the Authorization header.
class SigV4Signer
{
public:
    SigV4Signer(QString region, QString service) : m_region(std::move(region)), m_service(std::move(service)) {}

    // Adds X-Amz-Date, X-Amz-Security-Token (temporary credentials) and Authorization to
    // the request's headers, signing those it has (Host among them) and the body.
    void sign(SignableRequest &request, const AwsCredentials &credentials, const QDateTime &now) const;

    // The steps. The path is normalised (dot segments and repeated slashes removed) and
    // each segment percent-encoded; query parameters are encoded and sorted; header
    // names lower-cased and sorted, a name given twice signed once with its values joined
    // by commas in the order sent, each value trimmed with inner runs of spaces collapsed.
    static QByteArray canonicalRequest(const SignableRequest &request, QByteArray *signedHeaders = nullptr);
    QByteArray credentialScope(const QByteArray &date) const; // DATE/REGION/SERVICE/aws4_request
    QByteArray stringToSign(const QByteArray &amzDate, const QByteArray &canonicalRequest) const;
    QByteArray authorization(const AwsCredentials &credentials, const QByteArray &amzDate,
                             const QByteArray &canonicalRequest, const QByteArray &signedHeaders) const;

    static QByteArray amzDate(const QDateTime &time); // 20150830T123600Z

private:
    QString m_region;
    QString m_service;
};

} // namespace once
