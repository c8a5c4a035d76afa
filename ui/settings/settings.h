#pragma once

#include <QSettings>
#include <QStringList>

namespace once::ui {

// The console's settings, typed, over QSettings. Nothing else reads QSettings.
class Settings final
{
public:
    // Store URLs without their passwords (storeurl.h), newest first: a password lives
    // only in the memory of the session it was typed for.
    QStringList recentStores() const;
    void addRecentStore(const QString &url);
    // Rewrites the list without passwords, should an older version have saved one.
    void scrubRecentStores();
    // Broker queue URLs (amqp://, redis://), the same way: without passwords (queueurl.h).
    QStringList recentQueues() const;
    void addRecentQueue(const QString &url);
    void scrubRecentQueues();
    // The saved connections (URLs without passwords) whose password the user asked to
    // remember: the password itself is in the system keychain (SavedPasswords), never here.
    QStringList rememberedPasswords() const
    {
        return m_settings.value(QStringLiteral("passwords/remembered")).toStringList();
    }
    void setPasswordRemembered(const QString &savedUrl, bool remembered);

    // The alert thresholds are the store's (once alerts, AlertThresholds), the same for
    // every console and watcher on it: none is kept here.
    // The console's icon in the system tray, which raises desktop notifications.
    bool showInTray() const { return m_settings.value(QStringLiteral("tray/show"), true).toBool(); }
    void setShowInTray(bool show) { m_settings.setValue(QStringLiteral("tray/show"), show); }
    // Desktop notifications of one kind (TrayNotifier::Kind's names); byDefault where unset.
    bool notifies(const QString &kind, bool byDefault) const
    {
        return m_settings.value(QStringLiteral("notify/") + kind, byDefault).toBool();
    }
    void setNotifies(const QString &kind, bool on)
    {
        m_settings.setValue(QStringLiteral("notify/") + kind, on);
    }
    // How long the partner keeps idempotency keys (Stripe: 24 h).
    int idempotencyWindowHours() const
    {
        return m_settings.value(QStringLiteral("partner/idempotencyWindowHours"), 24).toInt();
    }
    void setIdempotencyWindowHours(int hours)
    {
        m_settings.setValue(QStringLiteral("partner/idempotencyWindowHours"), hours);
    }
    int redriveRate() const { return m_settings.value(QStringLiteral("redrive/rate"), 50).toInt(); }
    void setRedriveRate(int rate) { m_settings.setValue(QStringLiteral("redrive/rate"), rate); }

    QString partnerUrl() const
    {
        return m_settings
            .value(QStringLiteral("worker/partnerUrl"), QStringLiteral("http://127.0.0.1:8080/reminders"))
            .toString();
    }
    void setPartnerUrl(const QString &url) { m_settings.setValue(QStringLiteral("worker/partnerUrl"), url); }
    // A partners file (several partners and their routes); empty: the one URL above.
    QString partnersFile() const { return m_settings.value(QStringLiteral("worker/partnersFile")).toString(); }
    void setPartnersFile(const QString &path) { m_settings.setValue(QStringLiteral("worker/partnersFile"), path); }
    int concurrency() const { return m_settings.value(QStringLiteral("worker/concurrency"), 16).toInt(); }
    void setConcurrency(int n) { m_settings.setValue(QStringLiteral("worker/concurrency"), n); }
    int maxAttempts() const { return m_settings.value(QStringLiteral("worker/maxAttempts"), 8).toInt(); }
    void setMaxAttempts(int n) { m_settings.setValue(QStringLiteral("worker/maxAttempts"), n); }
    bool holdInDoubt() const
    {
        return m_settings.value(QStringLiteral("worker/holdInDoubt"), false).toBool();
    }
    void setHoldInDoubt(bool hold) { m_settings.setValue(QStringLiteral("worker/holdInDoubt"), hold); }

    // Times in UTC rather than this computer's zone (View > Times in UTC).
    bool timesInUtc() const { return m_settings.value(QStringLiteral("view/timesInUtc"), false).toBool(); }
    void setTimesInUtc(bool utc) { m_settings.setValue(QStringLiteral("view/timesInUtc"), utc); }

    QByteArray windowGeometry() const
    {
        return m_settings.value(QStringLiteral("window/geometry")).toByteArray();
    }
    void setWindowGeometry(const QByteArray &g) { m_settings.setValue(QStringLiteral("window/geometry"), g); }
    QByteArray windowState() const { return m_settings.value(QStringLiteral("window/state")).toByteArray(); }
    void setWindowState(const QByteArray &s) { m_settings.setValue(QStringLiteral("window/state"), s); }
    // Column layouts of the tables, by view name.
    QByteArray headerState(const QString &view) const
    {
        return m_settings.value(QStringLiteral("headers/") + view).toByteArray();
    }
    void setHeaderState(const QString &view, const QByteArray &s)
    {
        m_settings.setValue(QStringLiteral("headers/") + view, s);
    }
    // Where the user left a page's splitter.
    QByteArray splitterState(const QString &view) const
    {
        return m_settings.value(QStringLiteral("splitters/") + view).toByteArray();
    }
    void setSplitterState(const QString &view, const QByteArray &s)
    {
        m_settings.setValue(QStringLiteral("splitters/") + view, s);
    }

private:
    QSettings m_settings;
};

} // namespace once::ui
