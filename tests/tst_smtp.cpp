// The smtp profile: the mail it builds (headers, encodings, no header injection), what an
// SMTP transaction's end means (a table), and real sends through libcurl to a real SMTP
// server on loopback (tests/scripts/smtp-server: aiosmtpd, with AUTH, STARTTLS or TLS from
// the start, and faults: replies of 451 or 550, the connection cut after the final dot).
// Mails are counted at that server.
#include "deliveryharness.h"
#include "httptesting.h"
#include "smtptesting.h"
#include "teststores.h"

#include "model/reminder.h"
#include "partners/partnerprofile.h"
#include "partners/partnersettings.h"
#include "partners/profiles/smtpprofile.h"
#include "partners/smtpsender.h"

#include <QElapsedTimer>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>
#include <QTimeZone>

#include <memory>
#include <optional>

using namespace once;
using namespace oncetest;

namespace {

constexpr char Password[] = "pw-n3ver-in-an-error";

Reminder reminderWith(const QJsonObject &fields, int i = 1)
{
    QJsonObject object{
        {QStringLiteral("user_id"), QStringLiteral("user-%1").arg(i)},
        {QStringLiteral("reminder_id"), QStringLiteral("rem:%1/é").arg(i)},
        {QStringLiteral("scheduled_at"), QStringLiteral("2026-12-06T09:00:00Z")},
        {QStringLiteral("destination"), QStringLiteral("someone@example.org")},
        {QStringLiteral("subject"), QStringLiteral("Your appointment")},
        {QStringLiteral("body"), QStringLiteral("Tomorrow at 10:00.")},
    };
    for (auto it = fields.begin(); it != fields.end(); ++it)
        object.insert(it.key(), it.value());
    const ReminderParseResult parsed = parseReminder(QJsonDocument(object).toJson(QJsonDocument::Compact));
    if (!parsed.reminder)
        qFatal("test reminder refused: %s", qPrintable(parsed.error));
    return *parsed.reminder;
}

PartnerSettings smtpPartner(const QString &url, const QByteArray &password = Password)
{
    PartnerSettings partner;
    partner.name = QStringLiteral("mail");
    partner.profile = QStringLiteral("smtp");
    partner.url = QUrl(url);
    partner.account = "once";
    partner.token = password;
    partner.from = QStringLiteral("reminders@once.test");
    return partner;
}

// A header's value as the mail carries it (unfolded), or an empty array.
QByteArray header(const QByteArray &message, const QByteArray &name)
{
    const QByteArray head = message.left(message.indexOf("\r\n\r\n"));
    QByteArray value;
    bool inside = false;
    for (const QByteArray &line : head.split('\n')) {
        const QByteArray bare = line.endsWith('\r') ? line.chopped(1) : line;
        if (inside && (bare.startsWith(' ') || bare.startsWith('\t'))) {
            value += bare;
            continue;
        }
        inside = bare.toLower().startsWith(QByteArray(name.toLower() + ": "));
        if (inside)
            value = bare.mid(name.size() + 2);
    }
    return value;
}

// RFC 2047 B words, as a mail reader joins them.
QString decodeWords(const QByteArray &value)
{
    static const QRegularExpression word(QStringLiteral(R"(=\?UTF-8\?B\?([A-Za-z0-9+/=]*)\?=)"));
    QByteArray bytes;
    auto matches = word.globalMatch(QString::fromLatin1(value));
    while (matches.hasNext())
        bytes += QByteArray::fromBase64(matches.next().captured(1).toLatin1());
    return QString::fromUtf8(bytes);
}

QByteArray decodeQuotedPrintable(const QByteArray &text)
{
    QByteArray out;
    const QByteArray joined = QByteArray(text).replace("=\r\n", "");
    for (qsizetype i = 0; i < joined.size(); ++i) {
        if (joined.at(i) == '=' && i + 2 < joined.size()) {
            out += char(joined.mid(i + 1, 2).toInt(nullptr, 16));
            i += 2;
        } else {
            out += joined.at(i);
        }
    }
    return out;
}

// Sends one reminder and runs the event loop until its outcome comes.
std::optional<SendOutcome> sendOne(PartnerSender &sender, const Reminder &reminder, int waitMs = 20000)
{
    std::optional<SendOutcome> outcome;
    QObject context;
    sender.send(reminder, &context, [&outcome](const SendOutcome &o) { outcome = o; });
    if (!QTest::qWaitFor([&outcome] { return outcome.has_value(); }, waitMs))
        qWarning("no outcome within %d ms", waitMs);
    return outcome;
}

std::unique_ptr<PartnerSender> senderFor(const PartnerSettings &partner, int timeoutMs = 10000)
{
    return smtpProfile().createSender(partner, 2, timeoutMs, nullptr);
}

QByteArray kindName(SendOutcome::Kind kind)
{
    switch (kind) {
    case SendOutcome::Kind::Applied:
        return "Applied";
    case SendOutcome::Kind::Transient:
        return "Transient";
    case SendOutcome::Kind::InDoubt:
        return "InDoubt";
    case SendOutcome::Kind::PayloadChanged:
        return "PayloadChanged";
    case SendOutcome::Kind::Permanent:
        return "Permanent";
    case SendOutcome::Kind::CredentialsRefused:
        return "CredentialsRefused";
    case SendOutcome::Kind::Unsendable:
        return "Unsendable";
    }
    return "?";
}

} // namespace

class SmtpTest : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();

    void messageIdIsTheKeysOnEveryTry();
    void longKeyBecomesItsDigest();
    void nonAsciiSubjectAndBodyAreEncoded();
    void lineBreaksNeverReachTheMail_data();
    void lineBreaksNeverReachTheMail();
    void settingsAreChecked_data();
    void settingsAreChecked();
    void classification_data();
    void classification();

    void sendIsAppliedOnce();
    void wrongPasswordIsCredentialsRefused();
    void refusalsAreTransientOrPermanent_data();
    void refusalsAreTransientOrPermanent();
    void droppedAfterTheDotIsInDoubt();
    void noReplyToTheDotIsInDoubt();
    void injectedHeaderIsNeverSent();
    void nobodyListeningIsTransient();
    void starttlsWhereOffered();
    void starttlsRequiredRefusesPlainText();
    void implicitTls();

    void workerKilledAnywhereSendsNoMailTwice();

private:
    TestStores m_stores;
    SmtpServer m_server; // plain smtp://, AUTH with user "once" and Password
    QTemporaryDir m_certs;
};

void SmtpTest::initTestCase()
{
    QVERIFY(m_certs.isValid());
    QCOMPARE(m_server.start({QStringLiteral("--user"), QStringLiteral("once"), QStringLiteral("--password"),
                             QString::fromLatin1(Password)}),
             QString());
    QCOMPARE(partnerProfile(u"smtp"), &smtpProfile());
    QCOMPARE(profileForUrl(QUrl(QStringLiteral("smtps://mail.example:465"))), QStringLiteral("smtp"));
}

void SmtpTest::messageIdIsTheKeysOnEveryTry()
{
    const Reminder reminder = reminderWith({});
    const PartnerSettings partner = smtpPartner(QStringLiteral("smtp://127.0.0.1:25"));
    QString problem;
    const auto first =
        buildSmtpMail(partner, reminder, QDateTime(QDate(2026, 12, 6), QTime(10, 0), Qt::UTC), &problem);
    const auto second =
        buildSmtpMail(partner, reminder, QDateTime(QDate(2026, 12, 7), QTime(11, 0), Qt::UTC), &problem);
    QVERIFY2(first && second, qPrintable(problem));
    QCOMPARE(header(first->message, "Message-ID"), header(second->message, "Message-ID"));
    QVERIFY(header(first->message, "Date") != header(second->message, "Date"));
    QCOMPARE(header(first->message, "Date"), QByteArray("Sun, 06 Dec 2026 10:00:00 +0000"));
    QVERIFY(QRegularExpression(QStringLiteral("^<once\\.[0-9a-f]{32}@once\\.invalid>$"))
                .match(QString::fromLatin1(header(first->message, "Message-ID")))
                .hasMatch());
    QCOMPARE(first->messageId, smtpMessageId(reminder.sendKey));
    QCOMPARE(header(first->message, "X-Once-Send-Key"), reminder.sendKey);
    QCOMPARE(header(first->message, "From"), QByteArray("reminders@once.test"));
    QCOMPARE(header(first->message, "To"), QByteArray("someone@example.org"));
    QCOMPARE(header(first->message, "Subject"), QByteArray("Your appointment"));
    QCOMPARE(header(first->message, "Content-Type"), QByteArray("text/plain; charset=UTF-8"));
    QCOMPARE(first->envelopeFrom, QByteArray("reminders@once.test"));
    QCOMPARE(first->envelopeTo, QByteArray("someone@example.org"));
    // Another key, another id.
    QVERIFY(smtpMessageId(reminderWith({}, 2).sendKey) != first->messageId);
}

void SmtpTest::longKeyBecomesItsDigest()
{
    // The longest ids a key can be made of: 128 bytes each, percent-encoded three times over.
    const QString id(42, QChar(0x00e9)); // 84 bytes of UTF-8, 252 characters once encoded
    const QByteArray key =
        makeSendKey(id + id.left(22), id + id.left(22), QStringLiteral("2026-12-06T09:00:00Z"));
    QVERIFY(key.size() > 700);
    QCOMPARE(smtpSendKeyHeader(key), key); // it still fits on one line
    const QByteArray tooLong(990, 'k');
    const QByteArray digest = smtpSendKeyHeader(tooLong);
    QVERIFY(digest.startsWith("sha256:"));
    QCOMPARE(digest.size(), 7 + 64);
    QCOMPARE(smtpSendKeyHeader(tooLong), digest);
}

void SmtpTest::nonAsciiSubjectAndBodyAreEncoded()
{
    const QString subject = QStringLiteral(
        "Rendez-vous chez le médecin demain à 10 h, n'oubliez pas votre carte 🩺 — merci");
    const QString body =
        QStringLiteral(
            "Bonjour Zoë,\n.\nA line of one dot, a trailing space \nand ünïcödé, and a very long line: ") +
        QString(120, u'x') + QStringLiteral("=end");
    QString problem;
    const auto mail =
        buildSmtpMail(smtpPartner(QStringLiteral("smtp://127.0.0.1:25")),
                      reminderWith({{QStringLiteral("subject"), subject}, {QStringLiteral("body"), body}}),
                      QDateTime::currentDateTimeUtc(), &problem);
    QVERIFY2(mail, qPrintable(problem));
    const QByteArray encodedSubject = header(mail->message, "Subject");
    QCOMPARE(decodeWords(encodedSubject), subject);
    const QByteArray head = mail->message.left(mail->message.indexOf("\r\n\r\n"));
    for (const QByteArray &line : head.split('\n')) {
        QVERIFY2(line.size() <= 77, line.constData()); // RFC 2047 2: lines of encoded words within 76
        for (const char c : line)
            QVERIFY(static_cast<unsigned char>(c) < 0x80);
    }
    const QByteArray encodedBody = mail->message.mid(mail->message.indexOf("\r\n\r\n") + 4);
    for (const QByteArray &line : encodedBody.split('\n')) {
        QVERIFY2(line.size() <= 77, line.constData());
        QVERIFY2(!line.startsWith('.'), "a body line starts with a dot");
    }
    QCOMPARE(QString::fromUtf8(decodeQuotedPrintable(encodedBody)),
             QString(body).replace(u'\n', QStringLiteral("\r\n")) + QStringLiteral("\r\n"));
}

void SmtpTest::lineBreaksNeverReachTheMail_data()
{
    QTest::addColumn<QString>("field");
    QTest::addColumn<QString>("value");
    QTest::newRow("subject LF") << QStringLiteral("subject") << QStringLiteral("Hi\nBcc: victim@example.org");
    QTest::newRow("subject CR") << QStringLiteral("subject") << QStringLiteral("Hi\rBcc: victim@example.org");
    QTest::newRow("destination CRLF")
        << QStringLiteral("destination") << QStringLiteral("a@b.org\r\nBcc: victim@example.org");
    QTest::newRow("destination two addresses")
        << QStringLiteral("destination") << QStringLiteral("a@b.org,victim@example.org");
    QTest::newRow("from CRLF") << QStringLiteral("from")
                               << QStringLiteral("me@b.org\r\nBcc: victim@example.org");
    QTest::newRow("destination a number")
        << QStringLiteral("destination") << QStringLiteral("+15550100 victim");
}

void SmtpTest::lineBreaksNeverReachTheMail()
{
    QFETCH(QString, field);
    QFETCH(QString, value);
    PartnerSettings partner = smtpPartner(QStringLiteral("smtp://127.0.0.1:25"));
    Reminder reminder = reminderWith({});
    if (field == QLatin1String("from"))
        partner.from = value;
    else if (field == QLatin1String("destination"))
        reminder = reminderWith({{QStringLiteral("destination"), value}});
    else
        reminder = reminderWith({{field, value}});
    QString problem;
    QVERIFY(!buildSmtpMail(partner, reminder, QDateTime::currentDateTimeUtc(), &problem));
    QVERIFY(!problem.isEmpty());
    QVERIFY2(!problem.contains(u'\n') && !problem.contains(u'\r'), qPrintable(problem));
    QVERIFY2(!problem.contains(QLatin1String("victim")), qPrintable(problem));
}

void SmtpTest::settingsAreChecked_data()
{
    QTest::addColumn<QString>("url");
    QTest::addColumn<QString>("from");
    QTest::addColumn<QString>("starttls");
    QTest::addColumn<QString>("problem");
    QTest::newRow("fine") << QStringLiteral("smtp://mail.example:587") << QStringLiteral("a@b.org")
                          << QString() << QString();
    QTest::newRow("required") << QStringLiteral("smtp://mail.example:587") << QStringLiteral("a@b.org")
                              << QStringLiteral("required") << QString();
    QTest::newRow("smtps") << QStringLiteral("smtps://mail.example:465") << QStringLiteral("a@b.org")
                           << QString() << QString();
    QTest::newRow("http") << QStringLiteral("http://mail.example") << QStringLiteral("a@b.org") << QString()
                          << QStringLiteral("smtp:// or smtps://");
    QTest::newRow("no from") << QStringLiteral("smtp://mail.example:587") << QString() << QString()
                             << QStringLiteral("needs a \"from\"");
    QTest::newRow("bad from") << QStringLiteral("smtp://mail.example:587") << QStringLiteral("Me <a@b.org>")
                              << QString() << QStringLiteral("\"from\" must be a plain");
    QTest::newRow("bad starttls") << QStringLiteral("smtp://mail.example:587") << QStringLiteral("a@b.org")
                                  << QStringLiteral("yes") << QStringLiteral("\"starttls\" must be");
    QTest::newRow("starttls on smtps")
        << QStringLiteral("smtps://mail.example:465") << QStringLiteral("a@b.org")
        << QStringLiteral("required") << QStringLiteral("is for smtp://");
}

void SmtpTest::settingsAreChecked()
{
    QFETCH(QString, url);
    QFETCH(QString, from);
    QFETCH(QString, starttls);
    QFETCH(QString, problem);
    QJsonObject partner{{QStringLiteral("profile"), QStringLiteral("smtp")}, {QStringLiteral("url"), url}};
    if (!from.isEmpty())
        partner.insert(QStringLiteral("from"), from);
    if (!starttls.isEmpty())
        partner.insert(QStringLiteral("starttls"), starttls);
    const QJsonObject file{
        {QStringLiteral("partners"), QJsonObject{{QStringLiteral("mail"), partner}}},
        {QStringLiteral("routes"), QJsonObject{{QStringLiteral("*"), QStringLiteral("mail")}}}};
    QString error;
    const auto config = parsePartners(QJsonDocument(file).toJson(), &error);
    if (problem.isEmpty()) {
        QVERIFY2(config, qPrintable(error));
        QCOMPARE(config->partners.constFirst().profile, QStringLiteral("smtp"));
    } else {
        QVERIFY(!config);
        QVERIFY2(error.contains(problem), qPrintable(error));
    }
}

void SmtpTest::classification_data()
{
    using F = SmtpAttempt::Failure;
    using K = SendOutcome::Kind;
    QTest::addColumn<int>("failure");
    QTest::addColumn<int>("code");
    QTest::addColumn<bool>("inTransaction");
    QTest::addColumn<bool>("handedOver");
    QTest::addColumn<int>("kind");
    QTest::addColumn<QString>("errorClass");
    const auto row = [](const char *name, F failure, int code, bool inTransaction, bool handedOver, K kind,
                        const char *errorClass) {
        QTest::newRow(name) << int(failure) << code << inTransaction << handedOver << int(kind)
                            << QString::fromLatin1(errorClass);
    };
    row("250 after the dot", F::None, 250, true, true, K::Applied, "");
    row("no connection", F::Connect, 0, false, false, K::Transient, "connect-failed");
    row("no such host", F::Resolve, 0, false, false, K::Transient, "connect-failed");
    row("TLS", F::Tls, 220, false, false, K::Transient, "connect-failed");
    row("421 at the greeting", F::ServerReply, 421, false, false, K::Transient, "smtp-4xx");
    row("554 at the greeting", F::ServerReply, 554, false, false, K::Transient, "smtp-5xx");
    row("504 to AUTH", F::ServerReply, 504, false, false, K::Transient, "smtp-5xx");
    row("451 at RCPT", F::ServerReply, 451, true, false, K::Transient, "smtp-4xx");
    row("451 after the dot", F::ServerReply, 451, true, true, K::Transient, "smtp-4xx");
    row("550 at RCPT", F::ServerReply, 550, true, false, K::Permanent, "smtp-5xx");
    row("554 after the dot", F::ServerReply, 554, true, true, K::Permanent, "smtp-5xx");
    row("535", F::LoginDenied, 535, false, false, K::CredentialsRefused, "credentials-refused");
    row("530 at MAIL", F::ServerReply, 530, true, false, K::CredentialsRefused, "credentials-refused");
    row("lost before the dot", F::ConnectionLost, 354, true, false, K::Transient, "connection-lost");
    row("lost after the dot", F::ConnectionLost, 354, true, true, K::InDoubt, "in-doubt");
    row("timed out after the dot", F::TimedOut, 354, true, true, K::InDoubt, "in-doubt");
    row("timed out before", F::TimedOut, 250, true, false, K::Transient, "timeout");
}

void SmtpTest::classification()
{
    QFETCH(int, failure);
    QFETCH(int, code);
    QFETCH(bool, inTransaction);
    QFETCH(bool, handedOver);
    QFETCH(int, kind);
    QFETCH(QString, errorClass);
    SmtpAttempt attempt;
    attempt.failure = SmtpAttempt::Failure(failure);
    attempt.replyCode = code;
    attempt.reply = QStringLiteral("said %1\r\n\x1b[2J").arg(QString::fromLatin1(Password));
    attempt.error = QStringLiteral("curl says %1").arg(QString::fromLatin1(Password));
    attempt.messageHandedOver = handedOver;
    attempt.inTransaction = inTransaction;
    const SecretRedactor redactor({QByteArray(Password)});
    const SendOutcome outcome = classifySmtp(attempt, redactor);
    QCOMPARE(kindName(outcome.kind), kindName(SendOutcome::Kind(kind)));
    QCOMPARE(outcome.errorClass, errorClass);
    QVERIFY2(!outcome.error.contains(QLatin1String(Password)) &&
                 !outcome.providerRequestId.contains(QLatin1String(Password)),
             qPrintable(outcome.error));
    QVERIFY(!outcome.error.contains(u'\n') && !outcome.error.contains(QChar(0x1b)));
}

void SmtpTest::sendIsAppliedOnce()
{
    const Reminder reminder = reminderWith({}, 10);
    const auto sender = senderFor(smtpPartner(m_server.url()));
    const int before = m_server.stats().value(QLatin1String("mails")).toInt();
    const auto outcome = sendOne(*sender, reminder);
    QVERIFY(outcome);
    QCOMPARE(kindName(outcome->kind), QByteArray("Applied"));
    QVERIFY2(outcome->providerRequestId.startsWith(QLatin1String("2.0.0 Ok: queued as once-")),
             qPrintable(outcome->providerRequestId));
    QCOMPARE(sender->displayUrl(), m_server.url());
    const QJsonObject stats = m_server.stats();
    QCOMPARE(stats.value(QLatin1String("mails")).toInt(), before + 1);
    QCOMPARE(
        stats.value(QLatin1String("by_key")).toObject().value(QString::fromLatin1(reminder.sendKey)).toInt(),
        1);
    QCOMPARE(stats.value(QLatin1String("by_message_id"))
                 .toObject()
                 .value(QString::fromLatin1(smtpMessageId(reminder.sendKey)))
                 .toInt(),
             1);
    const QJsonObject mail = m_server.mails().last().toObject();
    QCOMPARE(mail.value(QLatin1String("from")).toString(), QStringLiteral("reminders@once.test"));
    QCOMPARE(mail.value(QLatin1String("to")).toArray().first().toString(),
             QStringLiteral("someone@example.org"));
    QCOMPARE(mail.value(QLatin1String("user")).toString(), QStringLiteral("once"));
    QVERIFY(mail.value(QLatin1String("data"))
                .toString()
                .contains(QLatin1String("Subject: Your appointment\r\n")));
}

void SmtpTest::wrongPasswordIsCredentialsRefused()
{
    const auto sender = senderFor(smtpPartner(m_server.url(), "not-the-password-" + QByteArray(Password)));
    const int before = m_server.stats().value(QLatin1String("mails")).toInt();
    const auto outcome = sendOne(*sender, reminderWith({}, 11));
    QVERIFY(outcome);
    QCOMPARE(kindName(outcome->kind), QByteArray("CredentialsRefused"));
    QCOMPARE(outcome->errorClass, QStringLiteral("credentials-refused"));
    QVERIFY2(outcome->error.contains(QLatin1String("535")), qPrintable(outcome->error));
    QVERIFY2(!outcome->error.contains(QLatin1String(Password)), qPrintable(outcome->error));
    QCOMPARE(m_server.stats().value(QLatin1String("mails")).toInt(), before);
}

void SmtpTest::refusalsAreTransientOrPermanent_data()
{
    QTest::addColumn<QString>("at");
    QTest::addColumn<int>("code");
    QTest::addColumn<QByteArray>("kind");
    QTest::newRow("451 at RCPT") << QStringLiteral("rcpt") << 451 << QByteArray("Transient");
    QTest::newRow("550 at RCPT") << QStringLiteral("rcpt") << 550 << QByteArray("Permanent");
    QTest::newRow("451 after the dot") << QStringLiteral("data") << 451 << QByteArray("Transient");
    QTest::newRow("554 after the dot") << QStringLiteral("data") << 554 << QByteArray("Permanent");
}

void SmtpTest::refusalsAreTransientOrPermanent()
{
    QFETCH(QString, at);
    QFETCH(int, code);
    QFETCH(QByteArray, kind);
    QVERIFY(m_server.setFault({{QStringLiteral("mode"), QStringLiteral("reply")},
                               {QStringLiteral("at"), at},
                               {QStringLiteral("code"), code},
                               {QStringLiteral("count"), 1}}));
    const int before = m_server.stats().value(QLatin1String("mails")).toInt();
    const auto sender = senderFor(smtpPartner(m_server.url()));
    const auto outcome = sendOne(*sender, reminderWith({}, 12));
    QVERIFY(outcome);
    QCOMPARE(kindName(outcome->kind), kind);
    QVERIFY2(outcome->error.startsWith(QStringLiteral("SMTP %1").arg(code)), qPrintable(outcome->error));
    QCOMPARE(m_server.stats().value(QLatin1String("mails")).toInt(), before);
}

void SmtpTest::droppedAfterTheDotIsInDoubt()
{
    const Reminder reminder = reminderWith({}, 13);
    QVERIFY(m_server.setFault(
        {{QStringLiteral("mode"), QStringLiteral("drop-after-dot")}, {QStringLiteral("count"), 1}}));
    const auto sender = senderFor(smtpPartner(m_server.url()));
    const auto outcome = sendOne(*sender, reminder);
    QVERIFY(outcome);
    QCOMPARE(kindName(outcome->kind), QByteArray("InDoubt"));
    QCOMPARE(outcome->errorClass, QStringLiteral("in-doubt"));
    // The server has the mail the worker cannot know about.
    const QJsonObject stats = m_server.stats();
    QCOMPARE(
        stats.value(QLatin1String("by_key")).toObject().value(QString::fromLatin1(reminder.sendKey)).toInt(),
        1);
    QVERIFY(stats.value(QLatin1String("dropped")).toInt() >= 1);
}

void SmtpTest::noReplyToTheDotIsInDoubt()
{
    const Reminder reminder = reminderWith({}, 19);
    QVERIFY(m_server.setFault(
        {{QStringLiteral("mode"), QStringLiteral("hang-after-dot")}, {QStringLiteral("count"), 1}}));
    const auto sender = senderFor(smtpPartner(m_server.url()), 1000);
    // The caller's thread (the engine's) goes on while the mail waits for its reply.
    std::optional<SendOutcome> outcome;
    QObject context;
    QElapsedTimer clock;
    clock.start();
    sender->send(reminder, &context, [&outcome](const SendOutcome &o) { outcome = o; });
    QVERIFY2(clock.elapsed() < 500, qPrintable(QStringLiteral("send() took %1 ms").arg(clock.elapsed())));
    QVERIFY(!outcome);
    QTRY_VERIFY_WITH_TIMEOUT(outcome.has_value(), 20000);
    QVERIFY2(clock.elapsed() >= 1000, "the outcome came before the timeout");
    QCOMPARE(kindName(outcome->kind), QByteArray("InDoubt"));
    QVERIFY2(outcome->error.contains(QLatin1String("no reply to the end of the mail")),
             qPrintable(outcome->error));
    QCOMPARE(m_server.stats()
                 .value(QLatin1String("by_key"))
                 .toObject()
                 .value(QString::fromLatin1(reminder.sendKey))
                 .toInt(),
             1);
}

void SmtpTest::injectedHeaderIsNeverSent()
{
    const int before = m_server.stats().value(QLatin1String("mails")).toInt();
    const auto sender = senderFor(smtpPartner(m_server.url()));
    const auto outcome = sendOne(
        *sender,
        reminderWith({{QStringLiteral("subject"), QStringLiteral("Hi\r\nBcc: victim@example.org")}}, 14));
    QVERIFY(outcome);
    QCOMPARE(kindName(outcome->kind), QByteArray("Unsendable"));
    QVERIFY2(outcome->error.contains(QLatin1String("line break")), qPrintable(outcome->error));
    QCOMPARE(m_server.stats().value(QLatin1String("mails")).toInt(), before);
}

void SmtpTest::nobodyListeningIsTransient()
{
    QTcpServer closed;
    QVERIFY(closed.listen(QHostAddress::LocalHost));
    const quint16 port = closed.serverPort();
    closed.close();
    const auto sender = senderFor(smtpPartner(QStringLiteral("smtp://127.0.0.1:%1").arg(port)));
    const auto outcome = sendOne(*sender, reminderWith({}, 15));
    QVERIFY(outcome);
    QCOMPARE(kindName(outcome->kind), QByteArray("Transient"));
    QCOMPARE(outcome->errorClass, QStringLiteral("connect-failed"));
}

void SmtpTest::starttlsWhereOffered()
{
    const QString certificate = m_certs.filePath(QStringLiteral("server.pem"));
    const QString key = m_certs.filePath(QStringLiteral("server.key"));
    QCOMPARE(makeLoopbackCertificate(certificate, key), QString());
    SmtpServer server;
    QCOMPARE(server.start({QStringLiteral("--user"), QStringLiteral("once"), QStringLiteral("--password"),
                           QString::fromLatin1(Password), QStringLiteral("--cert"), certificate,
                           QStringLiteral("--key"), key}),
             QString());
    PartnerSettings partner = smtpPartner(server.url());
    // Without the server's CA the handshake fails, and the mail does not go out in plain text.
    {
        const auto outcome = sendOne(*senderFor(partner), reminderWith({}, 16));
        QVERIFY(outcome);
        QCOMPARE(kindName(outcome->kind), QByteArray("Transient"));
        QCOMPARE(outcome->errorClass, QStringLiteral("connect-failed"));
        QCOMPARE(server.stats().value(QLatin1String("mails")).toInt(), 0);
    }
    QString error;
    const auto tls = PartnerTls::load(certificate, QString(), QString(), &error);
    QVERIFY2(tls, qPrintable(error));
    partner.tls = *tls;
    const auto outcome = sendOne(*senderFor(partner), reminderWith({}, 16));
    QVERIFY(outcome);
    QCOMPARE(kindName(outcome->kind), QByteArray("Applied"));
    QCOMPARE(server.stats().value(QLatin1String("tls_mails")).toInt(), 1);
}

void SmtpTest::starttlsRequiredRefusesPlainText()
{
    PartnerSettings partner = smtpPartner(m_server.url());
    partner.options.insert(QStringLiteral("starttls"), QStringLiteral("required"));
    const int before = m_server.stats().value(QLatin1String("mails")).toInt();
    const auto outcome = sendOne(*senderFor(partner), reminderWith({}, 17));
    QVERIFY(outcome);
    QCOMPARE(kindName(outcome->kind), QByteArray("Transient"));
    QCOMPARE(outcome->errorClass, QStringLiteral("connect-failed"));
    QCOMPARE(m_server.stats().value(QLatin1String("mails")).toInt(), before);
}

void SmtpTest::implicitTls()
{
    const QString certificate = m_certs.filePath(QStringLiteral("implicit.pem"));
    const QString key = m_certs.filePath(QStringLiteral("implicit.key"));
    QCOMPARE(makeLoopbackCertificate(certificate, key), QString());
    SmtpServer server;
    QCOMPARE(server.start({QStringLiteral("--user"), QStringLiteral("once"), QStringLiteral("--password"),
                           QString::fromLatin1(Password), QStringLiteral("--cert"), certificate,
                           QStringLiteral("--key"), key, QStringLiteral("--implicit-tls")}),
             QString());
    PartnerSettings partner = smtpPartner(server.url(QStringLiteral("smtps")));
    QString error;
    partner.tls = *PartnerTls::load(certificate, QString(), QString(), &error);
    const auto outcome = sendOne(*senderFor(partner), reminderWith({}, 18));
    QVERIFY(outcome);
    QCOMPARE(kindName(outcome->kind), QByteArray("Applied"));
    QCOMPARE(server.stats().value(QLatin1String("tls_mails")).toInt(), 1);
}

// Proof against a real worker: `once worker --partner smtp://...` killed with SIGKILL at
// every failpoint of a turn (tst_delivery's), a mail kept by the server and its
// connection cut before the 250, and a worker killed while it waits for the reply to the
// dot. SMTP has no idempotency, so whatever may have reached the server is held in doubt,
// never sent again: counted at the server, no key has two mails.
void SmtpTest::workerKilledAnywhereSendsNoMailTwice()
{
    const QString onceBin = qEnvironmentVariable("ONCE_BIN");
    QVERIFY2(!onceBin.isEmpty(), "ONCE_BIN must name the built once binary (ctest sets it)");
    SmtpServer server;
    QCOMPARE(server.start({QStringLiteral("--user"), QStringLiteral("once"), QStringLiteral("--password"),
                           QString::fromLatin1(Password)}),
             QString());
    const QDateTime started = QDateTime::currentDateTimeUtc();
    const QString storeUrl = m_stores.newUrl();
    OnceRunner once(onceBin, storeUrl);
    const auto init = once.run({QStringLiteral("init"), QStringLiteral("--lease"), QStringLiteral("2"),
                                QStringLiteral("--max-attempts"), QStringLiteral("20")});
    QVERIFY2(init.exitedWith(0), init.describe().constData());

    constexpr int Count = 20;
    QTemporaryDir dir;
    // Two batches: the second comes after the failpoint runs, which may have sent all of
    // the first, so that a mail is left for the worker killed at the dot.
    QSet<QByteArray> keys;
    const auto enqueue = [&](int from, int to) {
        QByteArray lines;
        for (int i = from; i < to; ++i) {
            const Reminder reminder =
                reminderWith({{QStringLiteral("destination"), QStringLiteral("user-%1@example.org").arg(i)},
                              {QStringLiteral("channel"), QStringLiteral("email")}},
                             100 + i);
            lines += reminder.payload + '\n';
            keys.insert(reminder.sendKey);
        }
        QFile file(dir.filePath(QStringLiteral("mails-%1.jsonl").arg(from)));
        if (!file.open(QIODevice::WriteOnly) || file.write(lines) != lines.size())
            return QStringLiteral("cannot write %1").arg(file.fileName());
        file.close();
        const auto run = once.run({QStringLiteral("enqueue"), file.fileName()});
        return run.exitedWith(0) ? QString() : QString::fromLocal8Bit(run.describe());
    };
    VERIFY_NO_PROBLEMS(enqueue(0, Count - 4));

    const QString partner = QStringLiteral("smtp://once:%1@127.0.0.1:%2?from=reminders@once.test")
                                .arg(QString::fromLatin1(Password))
                                .arg(server.smtpPort);
    const auto worker = [&](const QString &timeout) {
        return QStringList{QStringLiteral("worker"),
                           QStringLiteral("--partner"),
                           partner,
                           QStringLiteral("--lease"),
                           QStringLiteral("2"),
                           QStringLiteral("--timeout"),
                           timeout,
                           QStringLiteral("--concurrency"),
                           QStringLiteral("2"),
                           QStringLiteral("--backoff-base-ms"),
                           QStringLiteral("50"),
                           QStringLiteral("--until-idle")};
    };

    // The first mail is kept and its connection cut before the 250 (RFC 1047's window).
    QVERIFY(server.setFault(
        {{QStringLiteral("mode"), QStringLiteral("drop-after-dot")}, {QStringLiteral("count"), 1}}));
    for (const char *failpoint :
         {"after-consume", "after-claim", "after-send", "after-record", "before-ack"}) {
        const auto run =
            once.waitFor(once.start(worker(QStringLiteral("1")),
                                    {{QStringLiteral("ONCE_FAILPOINT"), QString::fromLatin1(failpoint)},
                                     {QStringLiteral("ONCE_FAILPOINT_SKIP"), QStringLiteral("2")}}),
                         WorkerTimeoutMs);
        QVERIFY2(run.crashed() || run.exitedWith(0), run.describe().constData());
        QCOMPARE(server.stats().value(QLatin1String("duplicates")).toInt(), 0);
    }

    // A worker killed while it waits for the reply to a dot the server has.
    VERIFY_NO_PROBLEMS(enqueue(Count - 4, Count));
    QVERIFY(server.setFault(
        {{QStringLiteral("mode"), QStringLiteral("hang-after-dot")}, {QStringLiteral("count"), 1}}));
    const int droppedBefore = server.stats().value(QLatin1String("dropped")).toInt();
    QProcess *waiting = once.start(worker(QStringLiteral("1")));
    const bool hung = pumpUntil(
        [&] {
            return server.stats().value(QLatin1String("dropped")).toInt() > droppedBefore ||
                   waiting->state() == QProcess::NotRunning;
        },
        30000);
    QVERIFY(hung);
    // The password its command line gave is not there for the machine's other users.
    if (waiting->state() == QProcess::Running) {
        QFile commandLine(QStringLiteral("/proc/%1/cmdline").arg(waiting->processId()));
        QVERIFY2(commandLine.open(QIODevice::ReadOnly), qPrintable(commandLine.errorString()));
        const QByteArray shown = commandLine.readAll();
        QVERIFY2(shown.contains("smtp://once:") && !shown.contains(Password), shown.constData());
    }
    // The server has the mail; the worker, still waiting for the reply (--timeout 1), dies.
    QVERIFY2(server.stats().value(QLatin1String("dropped")).toInt() > droppedBefore,
             "no mail was left to send");
    const bool killedWaiting = waiting->state() != QProcess::NotRunning;
    waiting->kill();
    waiting->waitForFinished(10000);

    QVERIFY(server.setFault({{QStringLiteral("mode"), QStringLiteral("none")}}));
    const auto last = once.waitFor(once.start(worker(QStringLiteral("1"))), WorkerTimeoutMs);
    QVERIFY2(last.exitedWith(0), last.describe().constData());
    // The password came in the URL; it went into AUTH only.
    QVERIFY(!last.err.contains(Password) && !last.out.contains(Password));
    QStringList scanned;
    const QStringList leaks = whereStoreHolds(m_stores, storeUrl, Password, started, &scanned);
    QVERIFY2(leaks.isEmpty(), qPrintable(leaks.join(QStringLiteral("; "))));

    const QJsonObject mails = server.stats();
    QCOMPARE(mails.value(QLatin1String("duplicates")).toInt(), 0);
    const QJsonObject byKey = mails.value(QLatin1String("by_key")).toObject();
    QSet<QByteArray> held;
    for (const auto &value : once.jsonArray({QStringLiteral("in-doubt"), QStringLiteral("--json")}))
        held.insert(value.toObject().value(QLatin1String("key")).toString().toLatin1());
    for (const QByteArray &key : keys) {
        const int count = byKey.value(QString::fromLatin1(key)).toInt();
        QVERIFY2(count <= 1, key.constData());
        // Not held: delivered, once. Held: the server has it or not, and nobody resent it.
        QVERIFY2(
            held.contains(key) || count == 1,
            qPrintable(QStringLiteral("%1: %2 mails, not held").arg(QString::fromLatin1(key)).arg(count)));
    }
    QVERIFY2(held.size() >= 2, "the mails left without their 250 are not held");
    const QJsonObject stats = once.stats();
    QCOMPARE(stats.value(QLatin1String("acked")).toInteger() +
                 stats.value(QLatin1String("in_doubt")).toInteger(),
             qint64(Count));
    QCOMPARE(stats.value(QLatin1String("ready")).toInteger(), qint64(0));
    QCOMPARE(stats.value(QLatin1String("in_doubt")).toInteger(), qint64(held.size()));
    qInfo("%d mails at the server, %d held in doubt, %d applied; killed %s",
          mails.value(QLatin1String("mails")).toInt(), int(held.size()),
          int(stats.value(QLatin1String("acked")).toInteger()),
          killedWaiting ? "while waiting for the reply to the dot" : "after it had given up on the reply");
}

QTEST_GUILESS_MAIN(SmtpTest)
#include "tst_smtp.moc"
