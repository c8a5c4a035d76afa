#pragma once

#include "dialogs/connectiondialog.h"

class QLineEdit;

namespace once::ui {

// File > Open Broker Queue: the queue at a broker (RabbitMQ or Redis Streams) that the
// console reads instead of the store's own, while the ledger stays in the store. The
// password goes into a masked field of its own (one typed into the URL moves there) and
// no further than url(), which the window opens the queue with; it is saved only in the
// system keychain, and only with Remember ticked (SavedPasswords).
class BrokerQueueDialog final : public ConnectionDialog
{
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(BrokerQueueDialog)

public:
    explicit BrokerQueueDialog(QWidget *parent = nullptr);

    // Fills the fields from a queue URL (a recent queue, or one that failed to open); its
    // password, if any, goes into the masked field.
    void setUrl(const QString &url);
    // The URL with the password, for opening the queue only.
    QString url() const;

    QLineEdit *urlField() const { return m_url; }
    QLineEdit *passwordField() const { return m_password; }

private:
    void movePasswordOutOfUrl();
    void updateOk();

    QLineEdit *m_url = nullptr;
    QLineEdit *m_password = nullptr;
};

} // namespace once::ui
