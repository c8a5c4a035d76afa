#pragma once

#include <QObject>
#include <QPointer>
#include <QString>

#include <functional>
#include <optional>

namespace once::ui {

// The passwords of saved connections (recent PostgreSQL stores and broker queues) that
// the user asked to remember ("Remember" in the connection dialogs). The password goes
// to the system keychain (the Secret Service: GNOME Keyring, KWallet; through
// QtKeychain), never to the console's settings, which keep only that a password was
// remembered for the connection, by its password-free URL. Without a keychain service
// nothing is remembered, and the console says so and asks each time.
//
// Every call returns at once: the keychain answers later, on the GUI thread's event
// loop, so a keychain that waits for the user to unlock it blocks nothing.
class SavedPasswords final : public QObject
{
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(SavedPasswords)

public:
    enum class Keychain
    {
        Unknown,
        Available,
        Unavailable
    };

    // Asks the keychain whether it is there; keychainChecked() tells.
    explicit SavedPasswords(QObject *parent = nullptr);
    ~SavedPasswords() override;

    Keychain keychain() const { return m_keychain; }
    // Why there is no keychain, in words for a person ("Secret Service: …").
    QString unavailableReason() const { return m_unavailableReason; }
    // Whether a password was remembered for this connection (its URL without password).
    bool isRemembered(const QString &savedUrl) const;

    // The remembered password, or nullopt and why not; done is called on context's
    // thread, and not at all once context is gone.
    using Found = std::function<void(const std::optional<QString> &password, const QString &whyNot)>;
    void find(const QString &savedUrl, QObject *context, Found done);
    // After the password opened the connection: into the keychain, and the settings note
    // that it is there. A keychain that refuses reports failed().
    void remember(const QString &savedUrl, const QString &password);
    // Unticked "Remember": out of the keychain and the settings.
    void forget(const QString &savedUrl);

signals:
    void keychainChecked();
    void failed(const QString &message);

private:
    void noteUnavailable(const QString &reason);

    Keychain m_keychain = Keychain::Unknown;
    QString m_unavailableReason;
};

} // namespace once::ui
