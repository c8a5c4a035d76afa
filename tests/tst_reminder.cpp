// Reminder validation, RFC 3339 parsing and send-key derivation.
#include "reminder.h"

#include <algorithm>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTest>
#include <QUrl>

using namespace once;

namespace {

QJsonObject validObject()
{
    return QJsonObject{
        {QStringLiteral("user_id"), QStringLiteral("u-42")},
        {QStringLiteral("reminder_id"), QStringLiteral("r-7")},
        {QStringLiteral("scheduled_at"), QStringLiteral("2026-12-01T09:00:00Z")},
        {QStringLiteral("destination"), QStringLiteral("+15550100")},
        {QStringLiteral("body"), QStringLiteral("Take your medicine")},
    };
}

QByteArray line(const QJsonObject &object)
{
    return QJsonDocument(object).toJson(QJsonDocument::Compact);
}

QByteArray key(const QString &scheduledAt)
{
    return makeSendKey(QStringLiteral("u"), QStringLiteral("r"), scheduledAt);
}

} // namespace

class TestReminder : public QObject
{
    Q_OBJECT

private slots:
    void parsesValidReminder();
    void keepsUnknownFieldsInPayload();
    void rejectsInvalidReminder_data();
    void rejectsInvalidReminder();
    void acceptsMessageAtSizeLimit();
    void rejectsMessageOverSizeLimit();
    void parsesRfc3339_data();
    void parsesRfc3339();
    void rejectsBadTimestamps_data();
    void rejectsBadTimestamps();
    void sendKeyComparison_data();
    void sendKeyComparison();
    void sendKeyIsEmptyForBadTime();
    void parsedSendKeyMatchesMakeSendKey();
    void idsWithColonsCannotCollide();
    void recurringReminderHasOneKeyPerOccurrence();
    void sendKeyIsPureAscii_data();
    void sendKeyIsPureAscii();
};

void TestReminder::parsesValidReminder()
{
    QJsonObject object = validObject();
    object.insert(QStringLiteral("scheduled_at"), QStringLiteral("2026-12-01T10:00:00+01:00"));
    object.insert(QStringLiteral("channel"), QStringLiteral("sms"));
    object.insert(QStringLiteral("event_id"), QStringLiteral("evt-1"));
    const auto result = parseReminder(line(object));
    QVERIFY2(result.reminder, qPrintable(result.error));
    QVERIFY(result.error.isEmpty());
    const Reminder &r = *result.reminder;
    QCOMPARE(r.userId, QStringLiteral("u-42"));
    QCOMPARE(r.reminderId, QStringLiteral("r-7"));
    QCOMPARE(r.destination, QStringLiteral("+15550100"));
    QCOMPARE(r.channel, QStringLiteral("sms"));
    QCOMPARE(r.eventId, QStringLiteral("evt-1"));
    QCOMPARE(r.scheduledAt.timeSpec(), Qt::UTC);
    QCOMPARE(r.scheduledAt, QDateTime(QDate(2026, 12, 1), QTime(9, 0), Qt::UTC));
    QCOMPARE(r.sendKey, QByteArray("u-42:r-7:2026-12-01T09:00:00Z"));
    // The payload is the compact JSON object, and it parses back to the same object.
    QVERIFY(!r.payload.contains('\n'));
    QCOMPARE(QJsonDocument::fromJson(r.payload).object(), object);
}

void TestReminder::keepsUnknownFieldsInPayload()
{
    QJsonObject object = validObject();
    object.insert(QStringLiteral("priority"), 3);
    object.insert(QStringLiteral("meta"), QJsonObject{{QStringLiteral("campaign"), QStringLiteral("winter")}});
    const auto result = parseReminder(line(object));
    QVERIFY2(result.reminder, qPrintable(result.error));
    const QJsonObject forwarded = QJsonDocument::fromJson(result.reminder->payload).object();
    QCOMPARE(forwarded.value(QStringLiteral("priority")).toInt(), 3);
    QCOMPARE(forwarded.value(QStringLiteral("meta")).toObject().value(QStringLiteral("campaign")).toString(),
             QStringLiteral("winter"));
    QCOMPARE(forwarded.value(QStringLiteral("body")).toString(), QStringLiteral("Take your medicine"));
    // Optional fields that were absent stay empty.
    QVERIFY(result.reminder->channel.isEmpty());
    QVERIFY(result.reminder->eventId.isEmpty());
}

void TestReminder::rejectsInvalidReminder_data()
{
    QTest::addColumn<QByteArray>("input");
    QTest::addColumn<QString>("errorMentions");

    for (const char *field : {"user_id", "reminder_id", "scheduled_at", "destination", "body"}) {
        QJsonObject missing = validObject();
        missing.remove(QLatin1String(field));
        QTest::addRow("missing %s", field) << line(missing) << QStringLiteral("missing field \"%1\"").arg(QLatin1String(field));

        QJsonObject number = validObject();
        number.insert(QLatin1String(field), 12);
        QTest::addRow("non-string %s", field)
            << line(number) << QStringLiteral("field \"%1\" must be a non-empty string").arg(QLatin1String(field));
    }
    QJsonObject nullUser = validObject();
    nullUser.insert(QStringLiteral("user_id"), QJsonValue::Null);
    QTest::newRow("null user_id") << line(nullUser) << QStringLiteral("missing field \"user_id\"");
    QJsonObject emptyBody = validObject();
    emptyBody.insert(QStringLiteral("body"), QString());
    QTest::newRow("empty body") << line(emptyBody) << QStringLiteral("\"body\" must be a non-empty string");
    QJsonObject arrayDestination = validObject();
    arrayDestination.insert(QStringLiteral("destination"), QJsonArray{QStringLiteral("a")});
    QTest::newRow("array destination") << line(arrayDestination) << QStringLiteral("\"destination\"");
    QJsonObject numberChannel = validObject();
    numberChannel.insert(QStringLiteral("channel"), 5);
    QTest::newRow("non-string channel") << line(numberChannel) << QStringLiteral("field \"channel\" must be a string");
    QJsonObject boolEvent = validObject();
    boolEvent.insert(QStringLiteral("event_id"), true);
    QTest::newRow("non-string event_id") << line(boolEvent) << QStringLiteral("field \"event_id\" must be a string");
    QJsonObject badTime = validObject();
    badTime.insert(QStringLiteral("scheduled_at"), QStringLiteral("yesterday"));
    QTest::newRow("bad scheduled_at") << line(badTime) << QStringLiteral("scheduled_at \"yesterday\" is not an RFC 3339");

    QTest::newRow("malformed JSON") << QByteArray(R"({"user_id": "u", )") << QStringLiteral("malformed JSON");
    QTest::newRow("not JSON at all") << QByteArray("hello") << QStringLiteral("malformed JSON");
    QTest::newRow("empty line") << QByteArray() << QStringLiteral("malformed JSON");
    QTest::newRow("JSON array") << QByteArray(R"([{"user_id": "u"}])") << QStringLiteral("must be a JSON object");
    // Qt's parser itself refuses a top-level scalar, so either message is a correct refusal.
    QTest::newRow("JSON string") << QByteArray(R"("just text")") << QStringLiteral("malformed JSON|must be a JSON object");
    QTest::newRow("JSON number") << QByteArray("42") << QStringLiteral("malformed JSON|must be a JSON object");
    QTest::newRow("JSON null") << QByteArray("null") << QStringLiteral("malformed JSON|must be a JSON object");
}

void TestReminder::rejectsInvalidReminder()
{
    QFETCH(QByteArray, input);
    QFETCH(QString, errorMentions);
    const auto result = parseReminder(input);
    QVERIFY(!result.reminder);
    // "|" separates acceptable alternatives.
    const QStringList alternatives = errorMentions.split(QLatin1Char('|'));
    QVERIFY2(std::any_of(alternatives.begin(), alternatives.end(),
                         [&](const QString &text) { return result.error.contains(text); }),
             qPrintable(QStringLiteral("error \"%1\" lacks \"%2\"").arg(result.error, errorMentions)));
    QVERIFY(!result.error.contains(QLatin1Char('\n')));
}

void TestReminder::acceptsMessageAtSizeLimit()
{
    QJsonObject object = validObject();
    object.insert(QStringLiteral("body"), QString());
    const qsizetype overhead = line(object).size();
    object.insert(QStringLiteral("body"), QString(MaxMessageBytes - overhead, QLatin1Char('x')));
    const QByteArray input = line(object);
    QCOMPARE(input.size(), MaxMessageBytes);
    const auto result = parseReminder(input);
    QVERIFY2(result.reminder, qPrintable(result.error));
    QCOMPARE(result.reminder->payload.size(), MaxMessageBytes);
}

void TestReminder::rejectsMessageOverSizeLimit()
{
    for (const qsizetype bodySize : {MaxMessageBytes, MaxMessageBytes + 1, 2 * MaxMessageBytes}) {
        QJsonObject object = validObject();
        object.insert(QStringLiteral("body"), QString(bodySize, QLatin1Char('x')));
        const QByteArray input = line(object);
        QVERIFY(input.size() > MaxMessageBytes);
        const auto result = parseReminder(input);
        QVERIFY(!result.reminder);
        QVERIFY2(result.error.contains(QLatin1String("over the 256 KiB limit")), qPrintable(result.error));
    }
    // One byte over the limit, even though the body itself is smaller than the limit.
    QJsonObject object = validObject();
    object.insert(QStringLiteral("body"), QString());
    const qsizetype overhead = line(object).size();
    object.insert(QStringLiteral("body"), QString(MaxMessageBytes - overhead + 1, QLatin1Char('x')));
    const QByteArray input = line(object);
    QCOMPARE(input.size(), MaxMessageBytes + 1);
    QVERIFY(!parseReminder(input).reminder);
}

void TestReminder::parsesRfc3339_data()
{
    QTest::addColumn<QString>("text");
    QTest::addColumn<QString>("canonical");
    QTest::addColumn<QDateTime>("utc");

    const auto at = [](int y, int mo, int d, int h, int mi, int s, int ms) {
        return QDateTime(QDate(y, mo, d), QTime(h, mi, s, ms), Qt::UTC);
    };
    QTest::newRow("Z") << QStringLiteral("2026-12-01T09:00:00Z") << QStringLiteral("2026-12-01T09:00:00Z")
                       << at(2026, 12, 1, 9, 0, 0, 0);
    QTest::newRow("lower-case z and t") << QStringLiteral("2026-12-01t09:00:00z")
                                        << QStringLiteral("2026-12-01T09:00:00Z") << at(2026, 12, 1, 9, 0, 0, 0);
    QTest::newRow("+01:00") << QStringLiteral("2026-12-01T10:00:00+01:00") << QStringLiteral("2026-12-01T09:00:00Z")
                            << at(2026, 12, 1, 9, 0, 0, 0);
    QTest::newRow("+00:00") << QStringLiteral("2026-12-01T09:00:00+00:00") << QStringLiteral("2026-12-01T09:00:00Z")
                            << at(2026, 12, 1, 9, 0, 0, 0);
    QTest::newRow("-05:30 crosses midnight") << QStringLiteral("2026-12-31T20:00:00-05:30")
                                             << QStringLiteral("2027-01-01T01:30:00Z") << at(2027, 1, 1, 1, 30, 0, 0);
    QTest::newRow("+14:00 previous day") << QStringLiteral("2026-03-01T05:00:00+14:00")
                                         << QStringLiteral("2026-02-28T15:00:00Z") << at(2026, 2, 28, 15, 0, 0, 0);
    QTest::newRow("fraction .5") << QStringLiteral("2026-12-01T09:00:00.5Z")
                                 << QStringLiteral("2026-12-01T09:00:00.5Z") << at(2026, 12, 1, 9, 0, 0, 500);
    QTest::newRow("fraction .500") << QStringLiteral("2026-12-01T09:00:00.500Z")
                                   << QStringLiteral("2026-12-01T09:00:00.5Z") << at(2026, 12, 1, 9, 0, 0, 500);
    QTest::newRow("fraction .000 dropped") << QStringLiteral("2026-12-01T09:00:00.000Z")
                                           << QStringLiteral("2026-12-01T09:00:00Z") << at(2026, 12, 1, 9, 0, 0, 0);
    QTest::newRow("fraction .123456789") << QStringLiteral("2026-12-01T09:00:00.123456789+02:00")
                                         << QStringLiteral("2026-12-01T07:00:00.123456789Z")
                                         << at(2026, 12, 1, 7, 0, 0, 123);
    QTest::newRow("leap day") << QStringLiteral("2028-02-29T12:00:00Z") << QStringLiteral("2028-02-29T12:00:00Z")
                              << at(2028, 2, 29, 12, 0, 0, 0);
    QTest::newRow("space separator") << QStringLiteral("2026-12-01 09:00:00Z") << QStringLiteral("2026-12-01T09:00:00Z")
                                     << at(2026, 12, 1, 9, 0, 0, 0);
}

void TestReminder::parsesRfc3339()
{
    QFETCH(QString, text);
    QFETCH(QString, canonical);
    QFETCH(QDateTime, utc);
    const auto parsed = parseRfc3339(text);
    QVERIFY(parsed);
    QCOMPARE(parsed->canonical, canonical);
    QCOMPARE(parsed->utc.toMSecsSinceEpoch(), utc.toMSecsSinceEpoch());
    QCOMPARE(parsed->utc.timeSpec(), Qt::UTC);
}

void TestReminder::rejectsBadTimestamps_data()
{
    QTest::addColumn<QString>("text");
    QTest::newRow("yesterday") << QStringLiteral("yesterday");
    QTest::newRow("empty") << QString();
    QTest::newRow("no offset") << QStringLiteral("2026-12-01T09:00:00");
    QTest::newRow("date only") << QStringLiteral("2026-12-01");
    QTest::newRow("no seconds") << QStringLiteral("2026-12-01T09:00Z");
    QTest::newRow("month 13") << QStringLiteral("2026-13-01T09:00:00Z");
    QTest::newRow("month 00") << QStringLiteral("2026-00-01T09:00:00Z");
    QTest::newRow("February 30") << QStringLiteral("2026-02-30T09:00:00Z");
    QTest::newRow("February 29 of a common year") << QStringLiteral("2026-02-29T09:00:00Z");
    QTest::newRow("hour 24") << QStringLiteral("2026-12-01T24:00:00Z");
    QTest::newRow("minute 60") << QStringLiteral("2026-12-01T09:60:00Z");
    QTest::newRow("offset +25:00") << QStringLiteral("2026-12-01T09:00:00+25:00");
    QTest::newRow("offset +01:60") << QStringLiteral("2026-12-01T09:00:00+01:60");
    QTest::newRow("offset without colon") << QStringLiteral("2026-12-01T09:00:00+0100");
    QTest::newRow("empty fraction") << QStringLiteral("2026-12-01T09:00:00.Z");
    QTest::newRow("trailing text") << QStringLiteral("2026-12-01T09:00:00Z tomorrow");
    QTest::newRow("leading space") << QStringLiteral(" 2026-12-01T09:00:00Z");
}

void TestReminder::rejectsBadTimestamps()
{
    QFETCH(QString, text);
    QVERIFY(!parseRfc3339(text));
    QVERIFY(makeSendKey(QStringLiteral("u"), QStringLiteral("r"), text).isEmpty());
}

void TestReminder::sendKeyComparison_data()
{
    QTest::addColumn<QString>("first");
    QTest::addColumn<QString>("second");
    QTest::addColumn<bool>("same");
    QTest::newRow("+01:00 equals Z") << QStringLiteral("2026-12-01T10:00:00+01:00")
                                     << QStringLiteral("2026-12-01T09:00:00Z") << true;
    QTest::newRow("-08:00 equals Z") << QStringLiteral("2026-12-01T01:00:00-08:00")
                                     << QStringLiteral("2026-12-01T09:00:00Z") << true;
    QTest::newRow("+00:00 equals Z") << QStringLiteral("2026-12-01T09:00:00+00:00")
                                     << QStringLiteral("2026-12-01T09:00:00Z") << true;
    QTest::newRow(".500 equals .5") << QStringLiteral("2026-12-01T09:00:00.500Z")
                                    << QStringLiteral("2026-12-01T09:00:00.5Z") << true;
    QTest::newRow(".0 equals none") << QStringLiteral("2026-12-01T09:00:00.0Z")
                                    << QStringLiteral("2026-12-01T09:00:00Z") << true;
    QTest::newRow(".5 differs from .6") << QStringLiteral("2026-12-01T09:00:00.5Z")
                                        << QStringLiteral("2026-12-01T09:00:00.6Z") << false;
    QTest::newRow(".5 differs from none") << QStringLiteral("2026-12-01T09:00:00.5Z")
                                          << QStringLiteral("2026-12-01T09:00:00Z") << false;
    QTest::newRow("one second apart") << QStringLiteral("2026-12-01T09:00:00Z")
                                      << QStringLiteral("2026-12-01T09:00:01Z") << false;
    QTest::newRow("same wall clock, other offset") << QStringLiteral("2026-12-01T09:00:00+01:00")
                                                   << QStringLiteral("2026-12-01T09:00:00Z") << false;
}

void TestReminder::sendKeyComparison()
{
    QFETCH(QString, first);
    QFETCH(QString, second);
    QFETCH(bool, same);
    const QByteArray a = key(first);
    const QByteArray b = key(second);
    QVERIFY(!a.isEmpty());
    QVERIFY(!b.isEmpty());
    QCOMPARE(a == b, same);
}

void TestReminder::sendKeyIsEmptyForBadTime()
{
    QVERIFY(makeSendKey(QStringLiteral("u"), QStringLiteral("r"), QStringLiteral("2026-12-01T09:00:00")).isEmpty());
    QCOMPARE(makeSendKey(QStringLiteral("u"), QStringLiteral("r"), QStringLiteral("2026-12-01T09:00:00Z")),
             QByteArray("u:r:2026-12-01T09:00:00Z"));
}

void TestReminder::parsedSendKeyMatchesMakeSendKey()
{
    QJsonObject object = validObject();
    object.insert(QStringLiteral("user_id"), QStringLiteral("a:b c"));
    object.insert(QStringLiteral("scheduled_at"), QStringLiteral("2026-12-01T04:00:00.250-05:00"));
    const auto result = parseReminder(line(object));
    QVERIFY2(result.reminder, qPrintable(result.error));
    QCOMPARE(result.reminder->sendKey,
             makeSendKey(QStringLiteral("a:b c"), QStringLiteral("r-7"), QStringLiteral("2026-12-01T09:00:00.25Z")));
    QCOMPARE(result.reminder->sendKey, QByteArray("a%3Ab%20c:r-7:2026-12-01T09:00:00.25Z"));
    QCOMPARE(result.reminder->scheduledAt.toMSecsSinceEpoch(),
             QDateTime(QDate(2026, 12, 1), QTime(9, 0, 0, 250), Qt::UTC).toMSecsSinceEpoch());
}

void TestReminder::idsWithColonsCannotCollide()
{
    const QString at = QStringLiteral("2026-12-01T09:00:00Z");
    const QByteArray first = makeSendKey(QStringLiteral("a:b"), QStringLiteral("c"), at);
    const QByteArray second = makeSendKey(QStringLiteral("a"), QStringLiteral("b:c"), at);
    QVERIFY(!first.isEmpty());
    QVERIFY(first != second);
    // Percent signs are encoded too, so an id that looks encoded stays distinct.
    const QByteArray third = makeSendKey(QStringLiteral("a%3Ab"), QStringLiteral("c"), at);
    QVERIFY(third != first);
    QVERIFY(third != second);
    // Each id decodes back from its own field: the first two ':' are the only separators.
    for (const auto &[user, reminder, k] : {std::tuple{QStringLiteral("a:b"), QStringLiteral("c"), first},
                                            std::tuple{QStringLiteral("a"), QStringLiteral("b:c"), second},
                                            std::tuple{QStringLiteral("a%3Ab"), QStringLiteral("c"), third}}) {
        const QList<QByteArray> parts = k.split(':');
        QVERIFY(parts.size() >= 3);
        QCOMPARE(QUrl::fromPercentEncoding(parts.at(0)), user);
        QCOMPARE(QUrl::fromPercentEncoding(parts.at(1)), reminder);
        QVERIFY(k.endsWith(":2026-12-01T09:00:00Z"));
    }
}

void TestReminder::recurringReminderHasOneKeyPerOccurrence()
{
    QJsonObject monday = validObject();
    monday.insert(QStringLiteral("scheduled_at"), QStringLiteral("2026-11-30T08:00:00Z"));
    QJsonObject tuesday = monday;
    tuesday.insert(QStringLiteral("scheduled_at"), QStringLiteral("2026-12-01T08:00:00Z"));
    const auto first = parseReminder(line(monday));
    const auto second = parseReminder(line(tuesday));
    QVERIFY(first.reminder && second.reminder);
    QCOMPARE(first.reminder->userId, second.reminder->userId);
    QCOMPARE(first.reminder->reminderId, second.reminder->reminderId);
    QVERIFY(first.reminder->sendKey != second.reminder->sendKey);
    // The same occurrence published again gets the same key.
    QCOMPARE(parseReminder(line(monday)).reminder->sendKey, first.reminder->sendKey);
}

void TestReminder::sendKeyIsPureAscii_data()
{
    QTest::addColumn<QString>("userId");
    QTest::addColumn<QString>("reminderId");
    QTest::newRow("plain") << QStringLiteral("u-1") << QStringLiteral("r_2.x~y");
    QTest::newRow("accents") << QStringLiteral("Zoë") << QStringLiteral("rappel-été");
    QTest::newRow("CJK and emoji") << QStringLiteral("用户") << QStringLiteral("\U0001F514");
    QTest::newRow("spaces, slashes, colons") << QStringLiteral("a b/c:d") << QStringLiteral("?x=1&y=%");
    QTest::newRow("control characters") << QStringLiteral("a\nb\tc") << QStringLiteral("\x01");
}

void TestReminder::sendKeyIsPureAscii()
{
    QFETCH(QString, userId);
    QFETCH(QString, reminderId);
    const QByteArray k = makeSendKey(userId, reminderId, QStringLiteral("2026-12-01T10:00:00.5+01:00"));
    QVERIFY(!k.isEmpty());
    for (const char c : k)
        QVERIFY2(uchar(c) > 0x20 && uchar(c) < 0x7f, k.constData());
    // The key survives a round trip through Latin-1 (how the store keeps it) unchanged.
    QCOMPARE(QString::fromLatin1(k).toLatin1(), k);
    const QList<QByteArray> parts = k.split(':');
    QCOMPARE(QUrl::fromPercentEncoding(parts.at(0)), userId);
    QCOMPARE(QUrl::fromPercentEncoding(parts.at(1)), reminderId);
}

QTEST_GUILESS_MAIN(TestReminder)
#include "tst_reminder.moc"
